package drill

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// Detection: the readiness probe of the old primary and the stall of a
// send (docs/drills.md, "detected").
const (
	probeEvery   = 100 * time.Millisecond
	probeTimeout = 500 * time.Millisecond
	stallAfter   = time.Second
)

// restClient is the REST client on base (an admin or fault-control URL).
func restClient(base string, hc *http.Client) *rest.Client {
	if hc == nil {
		hc = http.DefaultClient
	}
	return &rest.Client{ServiceURL: strings.TrimRight(base, "/"), HTTPClient: hc}
}

// isStatus reports whether err is an HTTP answer with that status.
func isStatus(err error, status int) bool {
	var re rest.Error
	return errors.As(err, &re) && re.Code == status
}

// control asks the fault-control API to act on a region: kill, start,
// partition, blackhole or heal.
func control(ctx context.Context, c *rest.Client, region, action string) error {
	if err := c.PostWithContext(ctx, "/regions/"+region+"/"+action, nil); err != nil {
		return fmt.Errorf("drill: %s %s: %w", action, region, err)
	}
	return nil
}

// controlRegion is a region in the fault-control API's GET /regions.
type controlRegion struct {
	Name string `json:"name"`
	Up   bool   `json:"up"`
	WAN  string `json:"wan"`
}

func controlRegions(ctx context.Context, c *rest.Client) ([]controlRegion, error) {
	var out []controlRegion
	if err := c.GetWithContext(ctx, "/regions", &out); err != nil {
		return nil, fmt.Errorf("drill: fault-control regions: %w", err)
	}
	return out, nil
}

// tenantInfo and namespacePolicies are the parts of the admin API's
// records the drill reads or writes.
type tenantInfo struct {
	AdminRoles      []string `json:"adminRoles"`
	AllowedClusters []string `json:"allowedClusters"`
}

type namespacePolicies struct {
	ReplicationClusters []string `json:"replication_clusters"`
}

// ensureNamespace makes ns ready for the drill (Config.Namespace) through
// the admin API at c and returns what it did, for the log; clusters are
// the regions a new namespace replicates to, --from and --to first. It
// reads the
// namespace's primary from every region in views (c's among them) and
// believes the highest epoch: a region that was cut off serves its old
// view for a while after the heal.
func ensureNamespace(ctx context.Context, c *rest.Client, views []*rest.Client, ns string, clusters []string, autoAfter time.Duration) ([]string, error) {
	from, to := clusters[0], clusters[1]
	did, pol, created, err := ensureTenantAndNamespace(ctx, c, ns, clusters)
	if err != nil {
		return did, err
	}
	if created {
		body := map[string]any{"mode": policy.ActiveStandby, "primary": from}
		if autoAfter > 0 {
			body["autoFailoverAfterSeconds"] = int(autoAfter / time.Second)
		}
		if err := c.PostWithContext(ctx, primaryPath(ns), body); err != nil {
			return did, fmt.Errorf("drill: make %s active-standby with primary %s: %w", ns, from, err)
		}
		did = append(did, fmt.Sprintf("made %s active-standby with primary %s", ns, from))
		return did, nil
	}
	if !slices.Contains(pol.ReplicationClusters, from) || !slices.Contains(pol.ReplicationClusters, to) {
		return did, fmt.Errorf("drill: namespace %s replicates to %s, not to both %s and %s: use another namespace or add them (isobar admin namespaces set-clusters)",
			ns, strings.Join(pol.ReplicationClusters, ", "), from, to)
	}
	f, err := latestPrimary(ctx, views, ns)
	if err != nil {
		return did, err
	}
	if f.Mode != policy.ActiveStandby {
		return did, fmt.Errorf("drill: namespace %s is %s: a failover drill needs an active-standby namespace (use a new namespace, or isobar admin namespaces set-primary %s %s)", ns, f.Mode, ns, from)
	}
	body := map[string]any{"mode": policy.ActiveStandby, "primary": from}
	if autoAfter > 0 && f.AutoAfterSeconds != int(autoAfter/time.Second) {
		body["autoFailoverAfterSeconds"] = int(autoAfter / time.Second)
		did = append(did, fmt.Sprintf("set automatic failover of %s after %v", ns, autoAfter))
	} else if f.Primary == from {
		return did, nil
	}
	if f.Primary != from {
		did = append(did, fmt.Sprintf("moved the primary of %s from %s to %s (planned) before the drill", ns, f.Primary, from))
	}
	if err := c.PostWithContext(ctx, primaryPath(ns), body); err != nil {
		return did, fmt.Errorf("drill: set the primary of %s to %s: %w", ns, from, err)
	}
	return did, nil
}

// ensureTenantAndNamespace makes ns and its tenant exist (ensureTenant),
// a new namespace replicated to clusters, and returns what it did, the
// namespace's policies and whether it created it.
func ensureTenantAndNamespace(ctx context.Context, c *rest.Client, ns string, clusters []string) (did []string, pol namespacePolicies, created bool, err error) {
	did, err = ensureTenant(ctx, c, ns, clusters)
	if err != nil {
		return did, pol, false, err
	}
	err = c.GetWithContext(ctx, "/admin/v2/namespaces/"+ns, &pol)
	switch {
	case isStatus(err, http.StatusNotFound):
		if err := createNamespace(ctx, c, ns, clusters); err != nil {
			return did, pol, false, err
		}
		did = append(did, fmt.Sprintf("created namespace %s replicated to %s", ns, strings.Join(clusters, ", ")))
		return did, namespacePolicies{ReplicationClusters: clusters}, true, nil
	case err != nil:
		return did, pol, false, fmt.Errorf("drill: namespace %s: %w", ns, err)
	}
	return did, pol, false, nil
}

// createNamespace creates ns replicated to clusters, in that order.
func createNamespace(ctx context.Context, c *rest.Client, ns string, clusters []string) error {
	if err := c.PutWithContext(ctx, "/admin/v2/namespaces/"+ns, namespacePolicies{ReplicationClusters: clusters}); err != nil {
		return fmt.Errorf("drill: create namespace %s: %w", ns, err)
	}
	// A create body's clusters are set again explicitly: the list
	// decides the order automatic failover tries regions in.
	if err := c.PostWithContext(ctx, "/admin/v2/namespaces/"+ns+"/replication", clusters); err != nil {
		return fmt.Errorf("drill: replication clusters of %s: %w", ns, err)
	}
	return nil
}

// ensureTenant makes the tenant of namespace ns exist and allow
// clusters, through the admin API at c, and returns what it did.
func ensureTenant(ctx context.Context, c *rest.Client, ns string, clusters []string) ([]string, error) {
	var did []string
	tenant, _, _ := strings.Cut(ns, "/")
	var ti tenantInfo
	err := c.GetWithContext(ctx, "/admin/v2/tenants/"+tenant, &ti)
	switch {
	case isStatus(err, http.StatusNotFound):
		ti = tenantInfo{AdminRoles: []string{}, AllowedClusters: clusters}
		if err := c.PutWithContext(ctx, "/admin/v2/tenants/"+tenant, ti); err != nil && !isStatus(err, http.StatusConflict) {
			return did, fmt.Errorf("drill: create tenant %s: %w", tenant, err)
		}
		did = append(did, fmt.Sprintf("created tenant %s (allowed clusters %s)", tenant, strings.Join(clusters, ", ")))
	case err != nil:
		return did, fmt.Errorf("drill: tenant %s: %w", tenant, err)
	case slices.ContainsFunc(clusters, func(r string) bool { return !slices.Contains(ti.AllowedClusters, r) }):
		for _, r := range clusters {
			if !slices.Contains(ti.AllowedClusters, r) {
				ti.AllowedClusters = append(ti.AllowedClusters, r)
			}
		}
		if ti.AdminRoles == nil {
			ti.AdminRoles = []string{}
		}
		if err := c.PostWithContext(ctx, "/admin/v2/tenants/"+tenant, ti); err != nil {
			return did, fmt.Errorf("drill: allow %s in tenant %s: %w", strings.Join(clusters, ", "), tenant, err)
		}
		did = append(did, fmt.Sprintf("allowed %s in tenant %s", strings.Join(clusters, ", "), tenant))
	}
	return did, nil
}

func primaryPath(ns string) string { return "/admin/v2/namespaces/" + ns + "/primary" }

// setSyncReplication gives ns synchronous replication to regions other
// regions (fallback after fallbackAfter), or none when regions is 0 (a
// namespace reused from an earlier run may have it).
func setSyncReplication(ctx context.Context, c *rest.Client, ns string, regions int, fallbackAfter time.Duration) error {
	path := "/admin/v2/namespaces/" + ns + "/syncReplication"
	if regions <= 0 {
		if err := c.DeleteWithContext(ctx, path); err != nil {
			return fmt.Errorf("drill: remove the synchronous replication of %s: %w", ns, err)
		}
		return nil
	}
	body := map[string]any{"regions": regions, "fallbackAfterSeconds": int(fallbackAfter / time.Second)}
	if err := c.PostWithContext(ctx, path, body); err != nil {
		return fmt.Errorf("drill: give %s synchronous replication to %d regions: %w", ns, regions, err)
	}
	return nil
}

func getPrimary(ctx context.Context, c *rest.Client, ns string) (policy.Failover, error) {
	var f policy.Failover
	if err := c.GetWithContext(ctx, primaryPath(ns), &f); err != nil {
		return f, fmt.Errorf("drill: primary of %s: %w", ns, err)
	}
	return f, nil
}

// latestPrimary is the failover policy of ns with the highest epoch
// among the regions' views.
func latestPrimary(ctx context.Context, views []*rest.Client, ns string) (policy.Failover, error) {
	var best policy.Failover
	for i, c := range views {
		f, err := getPrimary(ctx, c, ns)
		if err != nil {
			return f, err
		}
		if i == 0 || f.Epoch > best.Epoch {
			best = f
		}
	}
	return best, nil
}

func setPrimary(ctx context.Context, c *rest.Client, ns, primary string) error {
	if err := c.PostWithContext(ctx, primaryPath(ns), map[string]any{"mode": policy.ActiveStandby, "primary": primary}); err != nil {
		return fmt.Errorf("drill: set the primary of %s to %s: %w", ns, primary, err)
	}
	return nil
}

// ready reports whether url (a /readyz) answers 2xx within probeTimeout,
// and why not.
func ready(ctx context.Context, hc *http.Client, url string) error {
	if hc == nil {
		hc = http.DefaultClient
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no answer within %v", probeTimeout)
		}
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}

// detector records the first sign of the fault after it was injected.
type detector struct {
	mu    sync.Mutex
	armed time.Time // the fault; zero before it
	at    time.Time
	how   string
	done  chan struct{}
}

func newDetector() *detector { return &detector{done: make(chan struct{})} }

func (d *detector) arm(fault time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.armed = fault
}

// report records a sign of the fault seen at at, unless it came before
// the fault or after the first.
func (d *detector) report(at time.Time, how string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.armed.IsZero() || at.Before(d.armed) || !d.at.IsZero() {
		return
	}
	d.at, d.how = at, how
	close(d.done)
}

func (d *detector) result() (time.Time, string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.at, d.how
}

// watch reports to d, until ctx ends: the region's readiness probed
// every probeEvery, and the workload's oldest pending send checked as
// often (in a loop of its own, so a probe waiting for its answer does
// not hold it up).
func (d *detector) watch(ctx context.Context, hc *http.Client, region, readyURL string, rec *recorder) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every(ctx, probeEvery, func() {
			if oldest := rec.oldestPending(); !oldest.IsZero() && time.Since(oldest) >= stallAfter {
				d.report(oldest.Add(stallAfter), fmt.Sprintf("a send waited %v for its acknowledgement", stallAfter))
			}
		})
	}()
	every(ctx, probeEvery, func() {
		at := time.Now()
		if err := ready(ctx, hc, readyURL); err != nil && ctx.Err() == nil {
			d.report(at, fmt.Sprintf("readiness probe of %s: %v", region, err))
		}
	})
	wg.Wait()
}

// every runs f every period until ctx ends.
func every(ctx context.Context, period time.Duration, f func()) {
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}
