package admin

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// splitBundle serves PUT /admin/v2/namespaces/{t}/{ns}/{bundle}/split
// ?unload=&splitAlgorithmName= (Pulsar's; pulsaradmin's
// SplitNamespaceBundle). The bundle's owner splits it; another broker
// redirects there (placing the bundle first when no broker owns it, as
// Pulsar does).
func (s *Server) splitBundle(w http.ResponseWriter, r *http.Request) error {
	ns, _, api, err := s.opNamespace(r)
	if err != nil {
		return err
	}
	sp := s.cfg.Broker.Splitter
	if sp == nil {
		return fmt.Errorf("%w: bundles are not split by this broker", adminapi.ErrUnavailable)
	}
	auth, err := authoritative(r)
	if err != nil {
		return err
	}
	unload, err := strictBool(r, "unload")
	if err != nil {
		return err
	}
	alg := r.URL.Query().Get("splitAlgorithmName")
	switch alg {
	case "":
		alg = topic.SplitRangeEquallyDivide // Pulsar's default (defaultNamespaceBundleSplitAlgorithm)
	case topic.SplitRangeEquallyDivide, topic.SplitTopicCountEquallyDivide:
	default:
		return refuse(errkind.ErrPreconditionFailed, fmt.Sprintf("Unsupported split algorithm name %q: want %s or %s", alg,
			topic.SplitRangeEquallyDivide, topic.SplitTopicCountEquallyDivide))
	}
	b, err := s.bundleOf(r, ns, api)
	if err != nil {
		return err
	}
	o, err := api.BundleOwner(r.Context(), ns, b, true, auth)
	switch {
	case err != nil:
		return err
	case !o.Self:
		return redirectTo(w, r, o)
	}
	var lo, hi topic.Bundle
	if alg == topic.SplitRangeEquallyDivide {
		lo, hi, err = topic.SplitRange(b)
	} else {
		var bs []topic.Bundle
		if bs, err = api.Bundles(r.Context(), ns); err != nil {
			return err
		}
		byBundle, err := s.bundleTopics(r.Context(), ns, bs)
		if err != nil {
			return err
		}
		var hashes []uint32
		for _, n := range byBundle[b] {
			hashes = append(hashes, topic.Hash(n))
		}
		lo, hi, err = topic.SplitByTopicCount(b, hashes)
	}
	if errors.Is(err, topic.ErrUnsplittable) {
		return refuse(errkind.ErrPreconditionFailed, err.Error())
	}
	if err != nil {
		return err
	}
	if err := sp.SplitBundle(r.Context(), ns, b, lo, hi, unload); err != nil {
		return err
	}
	return noContent(w)
}
