package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/broker/dynconfig"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/globalconfig/policy"
	"github.com/isobar-mq/isobar/replication"
	"github.com/isobar-mq/isobar/topic"
)

var errNoBundles = fmt.Errorf("%w: namespace bundles are not served by this broker", adminapi.ErrUnavailable)

// peerTimeout bounds a request forwarded to another broker.
const peerTimeout = 2 * time.Minute

// nsOpRoutes registers the namespace and bundle operations (Pulsar's
// paths, as pulsaradmin sends them) under ns, the namespace's path.
//
// A bundle is a path segment, so some of Pulsar's paths overlap others
// ({bundle}/clearBacklog and clearBacklog/{subscription}); the mux cannot
// tell them apart and they share a handler that does (nsPost2).
func (s *Server) nsOpRoutes(ns string) {
	s.handle("PUT "+ns+"/unload", s.unloadNamespace)
	s.handle("PUT "+ns+"/{bundle}/unload", s.unloadBundle)
	s.handle("PUT "+ns+"/{bundle}/split", s.splitBundle)
	s.handle("POST "+ns+"/clearBacklog", s.clearNamespaceBacklog)
	s.handle("POST "+ns+"/{seg1}/{seg2}", s.nsPost2)
	s.handle("POST "+ns+"/{bundle}/{op}/{subscription}", s.bundlePost3)
	s.handle("DELETE "+ns+"/{bundle}", s.deleteBundle)
	s.handle("GET "+ns+"/inactiveTopicPolicies", s.getNSPolicy(inactivePolicy))
	s.handle("POST "+ns+"/inactiveTopicPolicies", s.setNSPolicy(inactivePolicy))
	s.handle("DELETE "+ns+"/inactiveTopicPolicies", s.removeNSPolicy(inactivePolicy))
	s.handle("GET "+ns+"/antiAffinity", s.getAntiAffinity)
	s.handle("POST "+ns+"/antiAffinity", s.setNSPolicy(antiAffinityPolicy))
	s.handle("DELETE "+ns+"/antiAffinity", s.removeNSPolicy(antiAffinityPolicy))
	// GET /admin/v2/namespaces/{cluster}/antiAffinity/{group} has the
	// shape of a namespace's GET .../{tenant}/{namespace}/{policy}; this
	// catches every such path the policies do not.
	s.handle("GET "+ns+"/{policy}", s.nsGet1)
}

// inactivePolicy is the namespace's inactive_topic_policies, served as
// the other namespace policies are (policies.go).
var inactivePolicy = nsPolicy{
	path: "inactiveTopicPolicies",
	get: func(p *policy.Policies) any {
		if p.InactiveTopicPolicies == nil {
			return nil
		}
		return p.InactiveTopicPolicies
	},
	set: func(_ *http.Request, body []byte, p *policy.Policies) error {
		v, err := decodeInactive(body)
		if err != nil {
			return err
		}
		p.InactiveTopicPolicies = v
		return nil
	},
	remove: func(_ *http.Request, p *policy.Policies) { p.InactiveTopicPolicies = nil },
}

// antiAffinityPolicy is the namespace's antiAffinityGroup, set and
// removed as the other policies are; getAntiAffinity reads it.
var antiAffinityPolicy = nsPolicy{
	path: "antiAffinity",
	set: func(_ *http.Request, body []byte, p *policy.Policies) error {
		g, err := decodeAntiAffinityGroup(body)
		if err != nil {
			return err
		}
		p.AntiAffinityGroup = g
		return nil
	},
	remove: func(_ *http.Request, p *policy.Policies) { p.AntiAffinityGroup = "" },
}

// decodeInactive reads InactiveTopicPolicies: 400 for a body that does
// not decode or an unknown mode (Pulsar's enum), 412 for a duration out
// of range (the store's check).
func decodeInactive(body []byte) (*policy.InactiveTopicPolicies, error) {
	var v policy.InactiveTopicPolicies
	if err := decodeValue(body, &v); err != nil {
		return nil, err
	}
	if err := policy.CheckInactiveTopicDeleteMode(v.InactiveTopicDeleteMode); err != nil {
		return nil, badRequest(err)
	}
	if err := v.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", policy.ErrInvalid, err)
	}
	return &v, nil
}

// decodeAntiAffinityGroup reads a group name sent as a JSON string
// (pulsaradmin) or as the bare name (Pulsar's Java admin, curl).
func decodeAntiAffinityGroup(body []byte) (string, error) {
	b := bytes.TrimSpace(body)
	if len(b) == 0 || string(b) == "null" {
		return "", refuse(errkind.ErrBadRequest, "Anti-affinity group should not be null")
	}
	g := string(b)
	if b[0] == '"' {
		if err := json.Unmarshal(b, &g); err != nil {
			return "", badRequest(fmt.Errorf("body: %w", err))
		}
	}
	if g == "" {
		return "", refuse(errkind.ErrPreconditionFailed, "Anti-affinity group can't be empty")
	}
	if err := policy.CheckAntiAffinityGroup(g); err != nil {
		return "", fmt.Errorf("%w: %w", policy.ErrInvalid, err)
	}
	return g, nil
}

// getAntiAffinity answers the group as Pulsar does: the bare name (which
// pulsaradmin reads as it comes), 204 when there is none.
func (s *Server) getAntiAffinity(w http.ResponseWriter, r *http.Request) error {
	var g string
	if err := s.readNamespace(r, func(p *policy.Policies) { g = p.AntiAffinityGroup }); err != nil {
		return err
	}
	if g == "" {
		return noContent(w)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, g)
	return nil
}

// nsGet1 serves GET /admin/v2/namespaces/{cluster}/antiAffinity/{group}
// ?property={tenant}: the tenant's namespaces in the group. Every other
// path of its shape is not found.
func (s *Server) nsGet1(w http.ResponseWriter, r *http.Request) error {
	if r.PathValue("namespace") != "antiAffinity" {
		return refuse(errkind.ErrNotFound, "Not found: "+r.URL.Path)
	}
	if s.cfg.Policies == nil {
		return errNoPolicies
	}
	cluster, group := r.PathValue("tenant"), r.PathValue("policy")
	tenant := r.URL.Query().Get("property")
	if tenant == "" {
		return refuse(errkind.ErrBadRequest, "Tenant should not be null")
	}
	if err := policy.CheckAntiAffinityGroup(group); err != nil {
		return refuse(errkind.ErrPreconditionFailed, err.Error())
	}
	ctx := r.Context()
	if _, err := s.cfg.Policies.Cluster(ctx, cluster); errors.Is(err, policy.ErrNotFound) {
		return refuse(errkind.ErrPreconditionFailed, "Cluster "+cluster+" does not exist.")
	} else if err != nil {
		return err
	}
	nss, err := s.cfg.Policies.AntiAffinityNamespaces(ctx, tenant, group)
	if errors.Is(err, policy.ErrNotFound) {
		return refuse(errkind.ErrNotFound, "Tenant does not exist")
	}
	if err != nil {
		return err
	}
	return ok(w, nonNil(nss))
}

// ---- the namespace's bundles

// opNamespace checks the request's namespace and returns its name, its
// policies and the broker's bundles.
func (s *Server) opNamespace(r *http.Request) (string, *policy.Policies, adminapi.Bundles, error) {
	if s.cfg.Policies == nil {
		return "", nil, nil, errNoPolicies
	}
	ns, err := nsName(r)
	if err != nil {
		return "", nil, nil, err
	}
	pol, err := s.cfg.Policies.Namespace(r.Context(), ns)
	if err != nil {
		return "", nil, nil, s.namespaceErr(r, err)
	}
	bs := s.cfg.Broker.Bundles
	if bs == nil {
		return "", nil, nil, errNoBundles
	}
	return ns, pol, bs, nil
}

// ParseBundle reads a bundle as Pulsar names them,
// "0x00000000_0x40000000" (each bound a number Go reads with base
// prefix, as Pulsar's Long.decode).
func ParseBundle(s string) (topic.Bundle, error) {
	lo, hi, ok := strings.Cut(s, "_")
	if !ok {
		return topic.Bundle{}, fmt.Errorf("Invalid bundle range: %s", s)
	}
	l, err1 := strconv.ParseUint(lo, 0, 32)
	h, err2 := strconv.ParseUint(hi, 0, 32)
	if err1 != nil || err2 != nil || h <= l {
		return topic.Bundle{}, fmt.Errorf("Invalid bundle range: %s", s)
	}
	return topic.Bundle{Lo: uint32(l), Hi: uint32(h)}, nil
}

// bundleOf is the request's {bundle}, which must be one of the
// namespace's (412 with Pulsar's reason otherwise).
func (s *Server) bundleOf(r *http.Request, ns string, api adminapi.Bundles) (topic.Bundle, error) {
	b, err := ParseBundle(r.PathValue("bundle"))
	if err != nil {
		return topic.Bundle{}, refuse(errkind.ErrPreconditionFailed, err.Error())
	}
	bs, err := api.Bundles(r.Context(), ns)
	if err != nil {
		return topic.Bundle{}, err
	}
	for _, x := range bs {
		if x == b {
			return b, nil
		}
	}
	return topic.Bundle{}, refuse(errkind.ErrPreconditionFailed, fmt.Sprintf("Invalid bundle range %s: not a bundle of namespace %s (it has %d)", b, ns, len(bs)))
}

// namespaceBundleTopics lists the namespace's bundles and groups its
// persistent topics by them (bundleTopics).
func (s *Server) namespaceBundleTopics(ctx context.Context, ns string, api adminapi.Bundles) ([]topic.Bundle, map[topic.Bundle][]topic.Name, error) {
	bs, err := api.Bundles(ctx, ns)
	if err != nil {
		return nil, nil, err
	}
	byBundle, err := s.bundleTopics(ctx, ns, bs)
	return bs, byBundle, err
}

// bundleTopics groups the namespace's persistent topics (partitions
// included) by bundle.
func (s *Server) bundleTopics(ctx context.Context, ns string, bs []topic.Bundle) (map[topic.Bundle][]topic.Name, error) {
	names, err := s.topics.ListTopics(ctx, ns, topic.Persistent)
	if err != nil {
		return nil, err
	}
	out := map[topic.Bundle][]topic.Name{}
	for _, n := range names {
		tn, err := topic.Parse(n)
		if err != nil {
			continue
		}
		b := topic.BundleFor(tn, bs)
		out[b] = append(out[b], tn)
	}
	return out, nil
}

// authoritative reads ?authoritative=: set on requests another broker
// forwarded or redirected here, which then take an unowned bundle.
func authoritative(r *http.Request) (bool, error) { return strictBool(r, "authoritative") }

// redirectTo answers 307 to the owner's same path with
// authoritative=true (Pulsar's redirect to a bundle's owner).
func redirectTo(w http.ResponseWriter, r *http.Request, o adminapi.BundleOwner) error {
	base := o.URL
	if r.TLS != nil && o.URLTLS != "" {
		base = o.URLTLS
	}
	q := r.URL.Query()
	q.Set("authoritative", "true")
	w.Header().Set("Location", strings.TrimRight(base, "/")+r.URL.EscapedPath()+"?"+q.Encode())
	writeJSON(w, http.StatusTemporaryRedirect, errorBody{Reason: "bundle served by " + base})
	return nil
}

// forward sends a bundle operation to the broker owning the bundle, with
// the caller's credentials, and answers as it did. Namespace operations
// fan out to every bundle this way, as Pulsar's do through its own
// admin client; the owner checks the caller's role again.
func (s *Server) forward(r *http.Request, o adminapi.BundleOwner, method, path string) error {
	base := o.URL
	if r.TLS != nil && o.URLTLS != "" {
		base = o.URLTLS
	}
	ctx, cancel := context.WithTimeout(r.Context(), peerTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(base, "/")+path+"?authoritative=true", nil)
	if err != nil {
		return fmt.Errorf("%w: forward to %s: %v", adminapi.ErrUnavailable, base, err)
	}
	if a := r.Header.Get("Authorization"); a != "" {
		req.Header.Set("Authorization", a)
	}
	c := s.cfg.PeerClient
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("%w: forward to the bundle's owner %s: %v", adminapi.ErrUnavailable, base, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	var eb errorBody
	if json.Unmarshal(body, &eb) != nil || eb.Reason == "" {
		eb.Reason = fmt.Sprintf("the bundle's owner %s answered %s", base, resp.Status)
	}
	return refuse(kindOfStatus(resp.StatusCode), eb.Reason)
}

// kindOfStatus is the kind of error a peer's HTTP status stands for, so
// a forwarded refusal is answered with the owner's status.
func kindOfStatus(status int) *errkind.Error {
	for _, k := range []*errkind.Error{errkind.ErrBadRequest, errkind.ErrAuthentication, errkind.ErrAuthorization, errkind.ErrNotFound,
		errkind.ErrNotAllowed, errkind.ErrConflict, errkind.ErrPreconditionFailed, errkind.ErrRequestTooLarge,
		errkind.ErrTooManyRequests, errkind.ErrServiceNotReady} {
		if k.HTTPStatus == status {
			return k
		}
	}
	return errkind.ErrUnknown
}

// eachBundle runs op on every bundle of the namespace that wants it:
// here when this broker owns it, else forwarded to its owner at
// .../{bundle}/suffix. acquire places an unowned bundle (clear backlog
// and unsubscribe act on stored topics, as Pulsar's do); without it an
// unowned bundle is skipped (unload). Every bundle is tried; the first
// failure is returned.
func (s *Server) eachBundle(r *http.Request, ns string, api adminapi.Bundles, bs []topic.Bundle, acquire bool,
	method, suffix string, op func(b topic.Bundle) error) error {
	var first error
	for _, b := range bs {
		err := func() error {
			o, err := api.BundleOwner(r.Context(), ns, b, acquire, false)
			switch {
			case err != nil:
				return err
			case !o.Owned:
				return nil
			case o.Self:
				return op(b)
			}
			return s.forward(r, o, method, "/admin/v2/namespaces/"+ns+"/"+b.String()+suffix)
		}()
		if err != nil && first == nil {
			first = fmt.Errorf("bundle %s: %w", b, err)
		}
	}
	return first
}

// ---- unload

func (s *Server) unloadNamespace(w http.ResponseWriter, r *http.Request) error {
	ns, _, api, err := s.opNamespace(r)
	if err != nil {
		return err
	}
	bs, err := api.Bundles(r.Context(), ns)
	if err != nil {
		return err
	}
	if err := s.eachBundle(r, ns, api, bs, false, http.MethodPut, "/unload", func(b topic.Bundle) error {
		return api.UnloadBundle(r.Context(), ns, b)
	}); err != nil {
		return err
	}
	return noContent(w)
}

func (s *Server) unloadBundle(w http.ResponseWriter, r *http.Request) error {
	ns, _, api, err := s.opNamespace(r)
	if err != nil {
		return err
	}
	if _, err := authoritative(r); err != nil {
		return err
	}
	b, err := s.bundleOf(r, ns, api)
	if err != nil {
		return err
	}
	o, err := api.BundleOwner(r.Context(), ns, b, false, false)
	switch {
	case err != nil:
		return err
	case !o.Owned:
		return noContent(w) // as Pulsar: nothing to unload
	case !o.Self:
		return redirectTo(w, r, o)
	}
	if err := api.UnloadBundle(r.Context(), ns, b); err != nil {
		return err
	}
	return noContent(w)
}

// ---- clear backlog and unsubscribe

// nsPost2 serves the POST paths of two segments after the namespace:
// {bundle}/clearBacklog, clearBacklog/{subscription} and
// unsubscribe/{subscription}. A first segment that reads as a bundle is
// one.
func (s *Server) nsPost2(w http.ResponseWriter, r *http.Request) error {
	seg1, seg2 := r.PathValue("seg1"), r.PathValue("seg2")
	if _, err := ParseBundle(seg1); err == nil {
		if seg2 != "clearBacklog" {
			return refuse(errkind.ErrNotFound, "Not found: "+r.URL.Path)
		}
		r.SetPathValue("bundle", seg1)
		return s.bundleOp(w, r, "clearBacklog", "")
	}
	switch seg1 {
	case "clearBacklog":
		return s.namespaceOp(w, r, "clearBacklog", seg2)
	case "unsubscribe":
		return s.namespaceOp(w, r, "unsubscribe", seg2)
	}
	return refuse(errkind.ErrNotFound, "Not found: "+r.URL.Path)
}

// bundlePost3 serves {bundle}/clearBacklog/{subscription} and
// {bundle}/unsubscribe/{subscription}.
func (s *Server) bundlePost3(w http.ResponseWriter, r *http.Request) error {
	switch op := r.PathValue("op"); op {
	case "clearBacklog", "unsubscribe":
		return s.bundleOp(w, r, op, r.PathValue("subscription"))
	}
	return refuse(errkind.ErrNotFound, "Not found: "+r.URL.Path)
}

func (s *Server) clearNamespaceBacklog(w http.ResponseWriter, r *http.Request) error {
	return s.namespaceOp(w, r, "clearBacklog", "")
}

// checkOpSubscription checks the subscription an operation names (empty:
// every subscription, clear backlog only).
func checkOpSubscription(op, sub string) error {
	if sub == "" && op == "clearBacklog" {
		return nil
	}
	if sub == "" {
		return refuse(errkind.ErrBadRequest, "Subscription should not be null")
	}
	if err := policy.ValidGrantSubscription(sub); err != nil {
		return badRequestf("invalid subscription name %q: 1 to %d bytes of UTF-8 without spaces, control characters or '/'", sub, policy.MaxRoleLen)
	}
	if strings.HasPrefix(sub, replication.ReservedPrefix) {
		if op == "unsubscribe" {
			return refuse(errkind.ErrPreconditionFailed, "Cannot unsubscribe a replication cursor")
		}
		return refuse(errkind.ErrPreconditionFailed, fmt.Sprintf("Cannot clear the backlog of %s: cursors named %s* are the broker's own (their backlog is what other regions have not received yet)", sub, replication.ReservedPrefix))
	}
	return nil
}

// namespaceOp runs clear backlog or unsubscribe on every bundle of the
// namespace that has topics.
func (s *Server) namespaceOp(w http.ResponseWriter, r *http.Request, op, sub string) error {
	ns, _, api, err := s.opNamespace(r)
	if err != nil {
		return err
	}
	if err := checkOpSubscription(op, sub); err != nil {
		return err
	}
	ctx := r.Context()
	bs, byBundle, err := s.namespaceBundleTopics(ctx, ns, api)
	if err != nil {
		return err
	}
	var with []topic.Bundle
	for _, b := range bs {
		if len(byBundle[b]) > 0 {
			with = append(with, b)
		}
	}
	suffix := "/" + op
	if sub != "" {
		suffix += "/" + url.PathEscape(sub)
	}
	if err := s.eachBundle(r, ns, api, with, true, http.MethodPost, suffix, func(b topic.Bundle) error {
		return s.bundleTopicsOp(ctx, op, sub, byBundle[b])
	}); err != nil {
		return err
	}
	return noContent(w)
}

// bundleOp runs clear backlog or unsubscribe on one bundle, here when
// this broker owns it (or takes it, the bundle being unowned), else
// redirected to its owner.
func (s *Server) bundleOp(w http.ResponseWriter, r *http.Request, op, sub string) error {
	ns, _, api, err := s.opNamespace(r)
	if err != nil {
		return err
	}
	auth, err := authoritative(r)
	if err != nil {
		return err
	}
	b, err := s.bundleOf(r, ns, api)
	if err != nil {
		return err
	}
	if err := checkOpSubscription(op, sub); err != nil {
		return err
	}
	ctx := r.Context()
	_, byBundle, err := s.namespaceBundleTopics(ctx, ns, api)
	if err != nil {
		return err
	}
	names := byBundle[b]
	if len(names) == 0 {
		return noContent(w) // nothing to act on: no need to own the bundle
	}
	o, err := api.BundleOwner(ctx, ns, b, true, auth)
	if err != nil {
		return err
	}
	if !o.Self {
		return redirectTo(w, r, o)
	}
	if err := s.bundleTopicsOp(ctx, op, sub, names); err != nil {
		return err
	}
	return noContent(w)
}

// bundleTopicsOp clears the backlog of (or deletes) subscription sub
// (every subscription when empty) on each of names, which this broker
// serves. Unsubscribe first checks that no topic has a consumer on sub,
// so a refusal changes nothing.
func (s *Server) bundleTopicsOp(ctx context.Context, op, sub string, names []topic.Name) error {
	type target struct {
		name topic.Name
		subs []string
	}
	var targets []target
	for _, n := range names {
		subs, err := s.topics.Subscriptions(ctx, n)
		if isKind(err, errkind.ErrTopicNotFound) {
			continue // deleted meanwhile
		}
		if err != nil {
			return fmt.Errorf("%s: %w", n, err)
		}
		var picked []string
		for _, x := range subs {
			if (sub == "" || x == sub) && !strings.HasPrefix(x, replication.ReservedPrefix) {
				picked = append(picked, x)
			}
		}
		if len(picked) > 0 {
			targets = append(targets, target{n, picked})
		}
	}
	if op == "unsubscribe" {
		for _, t := range targets {
			st, err := s.topics.Stats(ctx, t.name)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if len(st.Subscriptions[sub].Consumers) > 0 {
				return refuse(errkind.ErrPreconditionFailed, "Subscription has active connected consumers")
			}
		}
	}
	for _, t := range targets {
		for _, x := range t.subs {
			var err error
			if op == "unsubscribe" {
				err = s.topics.DeleteSubscription(ctx, t.name, x, false)
				if isKind(err, errkind.ErrPreconditionFailed) {
					return refuse(errkind.ErrPreconditionFailed, "Subscription has active connected consumers")
				}
			} else {
				err = s.topics.Skip(ctx, t.name, x, -1)
				if isKind(err, errkind.ErrNotAllowed) {
					err = nil // a reader's: nothing stored to clear
				}
			}
			if isKind(err, errkind.ErrSubscriptionNotFound) || isKind(err, errkind.ErrTopicNotFound) {
				err = nil // gone meanwhile
			}
			if err != nil {
				return fmt.Errorf("%s: subscription %s: %w", t.name, x, err)
			}
		}
	}
	return nil
}

// ---- delete a bundle

// deleteBundle serves DELETE .../{bundle}: refused (409) while the bundle
// holds topics unless ?force=true, which deletes them first; then the
// bundle is unloaded. As Pulsar, a namespace that replicates to other
// clusters is refused (412): its topics live in every region.
func (s *Server) deleteBundle(w http.ResponseWriter, r *http.Request) error {
	if seg := r.PathValue("bundle"); !strings.Contains(seg, "_") {
		// Not a bundle at all: one of the namespace's settings, most of
		// which have no DELETE (Pulsar: 405).
		return refuse(errkind.ErrNotAllowed, "Method Not Allowed: DELETE "+r.URL.Path)
	}
	ns, pol, api, err := s.opNamespace(r)
	if err != nil {
		return err
	}
	auth, err := authoritative(r)
	if err != nil {
		return err
	}
	force, err := strictBool(r, "force")
	if err != nil {
		return err
	}
	b, err := s.bundleOf(r, ns, api)
	if err != nil {
		return err
	}
	if len(pol.ReplicationClusters) > 1 {
		return refuse(errkind.ErrPreconditionFailed, "Cannot delete the global namespace "+ns+". There are still more than one replication clusters configured.")
	}
	ctx := r.Context()
	_, byBundle, err := s.namespaceBundleTopics(ctx, ns, api)
	if err != nil {
		return err
	}
	names := byBundle[b]
	if len(names) > 0 && !force {
		return refuse(errkind.ErrConflict, "Cannot delete non empty bundle")
	}
	o, err := api.BundleOwner(ctx, ns, b, len(names) > 0, auth)
	switch {
	case err != nil:
		return err
	case !o.Owned:
		return noContent(w)
	case !o.Self:
		return redirectTo(w, r, o)
	}
	for _, n := range names {
		if err := s.topics.DeleteTopic(ctx, n, true); err != nil && !isKind(err, errkind.ErrTopicNotFound) {
			return fmt.Errorf("%s: %w", n, err)
		}
	}
	if err := api.UnloadBundle(ctx, ns, b); err != nil {
		return err
	}
	return noContent(w)
}

// ---- a topic's own inactive topic policies

// inactiveTopicPolicy is the topic policy inactiveTopicPolicies; the
// broker's value (applied) is its dynamic settings'.
var inactiveTopicPolicy = topicPolicy{
	path: "inactiveTopicPolicies",
	get: func(tp *policy.TopicPolicies) any {
		if tp.InactiveTopicPolicies != nil {
			return *tp.InactiveTopicPolicies
		}
		return nil
	},
	set: func(_ *http.Request, body []byte, tp *policy.TopicPolicies) error {
		v, err := decodeInactive(body)
		if err != nil {
			return err
		}
		tp.InactiveTopicPolicies = v
		return nil
	},
	remove:  func(tp *policy.TopicPolicies) { tp.InactiveTopicPolicies = nil },
	nsField: "inactive_topic_policies",
	def:     brokerInactivePolicies,
}

// brokerInactivePolicies are the broker's inactive topic policies: its
// dynamic settings brokerDeleteInactiveTopics* as in force.
func brokerInactivePolicies(s *Server) any {
	out := policy.InactiveTopicPolicies{InactiveTopicDeleteMode: policy.DeleteWhenNoSubscriptions, MaxInactiveDurationSeconds: 60}
	if s.cfg.Broker.Brokers == nil {
		return out
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	v, err := s.cfg.Broker.Brokers.RuntimeConfig(ctx)
	if err != nil {
		return out
	}
	out.DeleteWhileInactive = strings.EqualFold(v[dynconfig.DeleteInactiveTopicsEnabled], "true")
	if m := v[dynconfig.DeleteInactiveTopicsMode]; m != "" {
		out.InactiveTopicDeleteMode = m
	}
	if n, err := strconv.Atoi(v[dynconfig.DeleteInactiveTopicsMaxInactiveSeconds]); err == nil {
		out.MaxInactiveDurationSeconds = n
	}
	return out
}
