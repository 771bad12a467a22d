package admin

import (
	"net/http"
	"strings"

	"github.com/isobar-mq/isobar/auth"
	"github.com/isobar-mq/isobar/topic"
)

// authorize decides whether the request's role may call the endpoint
// registered as pattern, as Pulsar's admin API does:
//   - clusters: any role reads them, superusers change them;
//   - tenants: superusers list, create, change and delete them, a
//     tenant's admin roles read it;
//   - namespaces, their policies and permissions: the tenant's admins;
//     unloading a namespace or bundle, splitting a bundle: superusers
//     (as Pulsar); listing an
//     anti-affinity group's namespaces: the admins of the tenant named
//     by ?property=;
//   - topics: reading a topic's stats, partitions, messages or
//     properties needs produce or consume permission, a subscription's
//     operations (peeking at its messages among them) need consume
//     permission on it, everything else the tenant's admins;
//   - lookups: produce or consume permission;
//   - schemas: reading a topic's schema, testing a schema's
//     compatibility or asking its version needs produce or consume
//     permission, adding a version produce permission (a producer adds
//     one through the binary protocol anyway), deleting the schema the
//     tenant's admins;
//   - brokers: any role checks health and readiness, superusers list
//     them;
//   - bookies (their racks and groups, decommissions, under-replicated
//     ledgers): superusers;
//   - transactions (/admin/v3/transactions): a transaction's metadata
//     and the coordinators' stats, any role (as Pulsar, which checks
//     only that the coordinator is owned here; the stats are counts);
//     slow transactions, superusers (they list every tenant's
//     transactions and their topics); a topic's transaction buffer,
//     produce or consume permission on the topic (as its stats);
//   - anything else: superusers.
//
// With authorization off every call is allowed.
func (s *Server) authorize(r *http.Request, pattern string) error {
	a := s.cfg.Authz
	if !a.Enabled() {
		return nil
	}
	id, _ := auth.IdentityFrom(r.Context())
	role, ctx := id.Role, r.Context()
	method, path, _ := strings.Cut(pattern, " ")
	tenant := r.PathValue("tenant")
	const v2 = "/admin/v2"
	switch {
	case strings.HasPrefix(path, v2+"/clusters"):
		if method == http.MethodGet {
			return nil
		}
		return a.SuperUser(role, "change clusters")
	case path == v2+"/tenants":
		return a.SuperUser(role, "list tenants")
	case strings.HasPrefix(path, v2+"/tenants/"):
		if method == http.MethodGet {
			return a.TenantAdmin(ctx, role, tenant, "read tenant "+tenant)
		}
		return a.SuperUser(role, "create, change or delete tenants")
	case strings.HasPrefix(path, v2+"/namespaces/") && strings.HasSuffix(path, "/unload"):
		return a.SuperUser(role, "unload namespaces and bundles")
	case strings.HasPrefix(path, v2+"/namespaces/") && strings.HasSuffix(path, "/split"):
		return a.SuperUser(role, "split bundles")
	case path == v2+"/namespaces/{tenant}/{namespace}/{policy}" && r.PathValue("namespace") == "antiAffinity":
		t := r.URL.Query().Get("property")
		return a.TenantAdmin(ctx, role, t, "list the anti-affinity groups of tenant "+t)
	case strings.HasPrefix(path, v2+"/namespaces/"):
		return a.TenantAdmin(ctx, role, tenant, "manage namespaces of tenant "+tenant)
	case strings.HasPrefix(path, v2+"/schemas/"):
		name, err := topic.Parse("persistent://" + tenant + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
		if err != nil {
			return err // the handler would refuse the name too
		}
		switch {
		case method == http.MethodDelete:
			return a.TenantAdmin(ctx, role, tenant, "delete the schema of "+name.String())
		case method == http.MethodPost && strings.HasSuffix(path, "/schema"):
			return a.Produce(ctx, role, name)
		}
		return a.Lookup(ctx, role, name)
	case path == v2+"/brokers/health" || path == v2+"/brokers/ready":
		return nil
	case strings.HasPrefix(path, v2+"/brokers"):
		return a.SuperUser(role, "list brokers")
	case strings.HasPrefix(path, "/admin/v3/transactions/slowTransactions/"):
		return a.SuperUser(role, "list slow transactions")
	case strings.HasPrefix(path, "/admin/v3/transactions/") && tenant != "":
		name, err := topic.Parse("persistent://" + tenant + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
		if err != nil {
			return err // the handler would refuse the name too
		}
		return a.Lookup(ctx, role, name)
	case strings.HasPrefix(path, "/admin/v3/transactions/") && method == http.MethodGet:
		return nil
	case strings.HasPrefix(path, v2+"/bookies/"):
		return a.SuperUser(role, "read or change the bookies' racks or decommission a bookie")
	}
	d, isTopic := topicDomain(path)
	if !isTopic {
		return a.SuperUser(role, "call "+pattern)
	}
	ns := r.PathValue("namespace")
	if r.PathValue("topic") == "" { // the namespace's topic lists
		return a.ListTopics(ctx, role, tenant, ns)
	}
	name, err := topic.Parse(string(d) + "://" + tenant + "/" + ns + "/" + r.PathValue("topic"))
	if err != nil {
		return err // the handler would refuse the name too
	}
	if strings.HasPrefix(path, "/lookup/") {
		return a.Lookup(ctx, role, name)
	}
	if sub := r.PathValue("sub"); sub != "" {
		return a.Consume(ctx, role, name, sub)
	}
	if method == http.MethodGet {
		for _, suffix := range []string{"/stats", "/partitioned-stats", "/internalStats", "/subscriptions", "/partitions", "/lastMessageId", "/ledger/{ledger}/entry/{entry}", "/examinemessage", "/messageid/{timestamp}", "/properties"} {
			if strings.HasSuffix(path, "/{topic}"+suffix) {
				return a.Lookup(ctx, role, name)
			}
		}
	}
	return a.TenantAdmin(ctx, role, tenant, "manage topic "+name.String())
}

// topicDomain is the domain of a topic endpoint's path (admin or lookup).
func topicDomain(path string) (topic.Domain, bool) {
	for _, d := range []topic.Domain{topic.Persistent, topic.NonPersistent} {
		if strings.HasPrefix(path, "/admin/v2/"+string(d)+"/") || strings.HasPrefix(path, "/lookup/v2/topic/"+string(d)+"/") {
			return d, true
		}
	}
	return "", false
}
