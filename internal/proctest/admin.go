package proctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Admin calls the admin REST API at base (a broker's http:// URL) and
// decodes a JSON answer into out (nil: ignored). Non-2xx is an error.
func Admin(ctx context.Context, base, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(raw)))
	}
	if out != nil && len(raw) > 0 {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// Replicate creates tenant (allowing every region) and namespace
// tenant/ns replicated to every region with de-duplication on, and waits
// until every broker of every region sees it.
func (f *Fed) Replicate(t testing.TB, tenant, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var clusters []string
	for _, r := range f.Regions {
		clusters = append(clusters, r.Name)
	}
	base := f.Regions[0].HTTPURLs[0]
	if err := Admin(ctx, base, http.MethodPut, "/admin/v2/tenants/"+tenant, map[string]any{"allowedClusters": clusters, "adminRoles": []string{}}, nil); err != nil {
		t.Fatal(err)
	}
	if err := Admin(ctx, base, http.MethodPut, "/admin/v2/namespaces/"+tenant+"/"+ns, map[string]any{"replication_clusters": clusters, "deduplicationEnabled": true}, nil); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Regions {
		for _, u := range r.HTTPURLs {
			for {
				var got []string
				err := Admin(ctx, u, http.MethodGet, "/admin/v2/namespaces/"+tenant+"/"+ns+"/replication", nil, &got)
				if err == nil && len(got) == len(clusters) {
					break
				}
				if ctx.Err() != nil {
					t.Fatalf("%s does not see %s/%s replicated to %v: %v %v", u, tenant, ns, clusters, got, err)
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
}

// Owner returns the index of the broker of r that owns topic (a full
// persistent:// name), by an HTTP lookup on any live broker.
func (r *Region) Owner(ctx context.Context, topic string) (int, error) {
	path := "/lookup/v2/topic/persistent/" + strings.TrimPrefix(topic, "persistent://")
	var lastErr error
	for _, u := range r.HTTPURLs {
		var res struct {
			BrokerURL string `json:"brokerUrl"`
		}
		if err := Admin(ctx, u, http.MethodGet, path, nil, &res); err != nil {
			lastErr = err
			continue
		}
		for i, s := range r.ServiceURLs {
			if s == res.BrokerURL {
				return i, nil
			}
		}
		return -1, fmt.Errorf("lookup of %s answered %q, not a broker of %s", topic, res.BrokerURL, r.Name)
	}
	return -1, lastErr
}
