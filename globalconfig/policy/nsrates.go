package policy

import (
	"fmt"
	"maps"
	"math"
	"slices"
)

// NamespaceRates are a namespace's rate limits, each by cluster (a
// namespace sets them for the cluster that took the request, as in
// Pulsar), in Pulsar's Policies names. A topic's own rate policies take
// precedence over them.
type NamespaceRates struct {
	PublishMaxMessageRate map[string]PublishRate `json:"publishMaxMessageRate,omitempty"`
	// TopicDispatchRate is the dispatch rate of each topic;
	// ClusterDispatchRate its older name, read when TopicDispatchRate has
	// no entry for the cluster.
	TopicDispatchRate        map[string]DispatchRate  `json:"topicDispatchRate,omitempty"`
	ClusterDispatchRate      map[string]DispatchRate  `json:"clusterDispatchRate,omitempty"`
	SubscriptionDispatchRate map[string]DispatchRate  `json:"subscriptionDispatchRate,omitempty"`
	ReplicatorDispatchRate   map[string]DispatchRate  `json:"replicatorDispatchRate,omitempty"`
	ClusterSubscribeRate     map[string]SubscribeRate `json:"clusterSubscribeRate,omitempty"`
}

var namespaceRateFields = []string{
	"publishMaxMessageRate", "topicDispatchRate", "clusterDispatchRate",
	"subscriptionDispatchRate", "replicatorDispatchRate", "clusterSubscribeRate",
}

func init() {
	for _, f := range namespaceRateFields {
		knownPolicyFields[f] = true
	}
}

// DispatchRateIn returns the topic dispatch rate of cluster (nil: none).
func (r NamespaceRates) DispatchRateIn(cluster string) *DispatchRate {
	if d, ok := r.TopicDispatchRate[cluster]; ok {
		return &d
	}
	if d, ok := r.ClusterDispatchRate[cluster]; ok {
		return &d
	}
	return nil
}

// RateIn returns m's entry for cluster (nil: none).
func RateIn[T any](m map[string]T, cluster string) *T {
	if v, ok := m[cluster]; ok {
		return &v
	}
	return nil
}

// ValidateDispatchRate checks a dispatch rate: budgets of -1 (none) or
// more, a period within Pulsar's int.
func ValidateDispatchRate(d DispatchRate) error {
	if d.DispatchThrottlingRateInMsg < -1 || d.DispatchThrottlingRateInByte < -1 {
		return fmt.Errorf("rates %d msg, %d bytes: less than -1", d.DispatchThrottlingRateInMsg, d.DispatchThrottlingRateInByte)
	}
	if d.RatePeriodInSecond < 0 || d.RatePeriodInSecond > math.MaxInt32 {
		return fmt.Errorf("ratePeriodInSecond %d is not within 0..%d", d.RatePeriodInSecond, math.MaxInt32)
	}
	return nil
}

// ValidatePublishRate checks a publish rate: budgets of -1 (none) or more.
func ValidatePublishRate(p PublishRate) error {
	if p.PublishThrottlingRateInMsg < -1 || p.PublishThrottlingRateInByte < -1 {
		return fmt.Errorf("rates %d msg, %d bytes: less than -1", p.PublishThrottlingRateInMsg, p.PublishThrottlingRateInByte)
	}
	return nil
}

// ValidateSubscribeRate checks a subscribe rate.
func ValidateSubscribeRate(s SubscribeRate) error {
	if s.SubscribeThrottlingRatePerConsumer < -1 {
		return fmt.Errorf("subscribeThrottlingRatePerConsumer %d is less than -1", s.SubscribeThrottlingRatePerConsumer)
	}
	if s.RatePeriodInSecond < 0 || s.RatePeriodInSecond > math.MaxInt32 {
		return fmt.Errorf("ratePeriodInSecond %d is not within 0..%d", s.RatePeriodInSecond, math.MaxInt32)
	}
	return nil
}

// validateRates checks every cluster's rates.
func (r NamespaceRates) validateRates() []error {
	var errs []error
	check := func(field, cluster string, err error) {
		if err == nil {
			err = validClusterName(cluster)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s.%s: %w", field, cluster, err))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(r.PublishMaxMessageRate)) {
		check("publishMaxMessageRate", c, ValidatePublishRate(r.PublishMaxMessageRate[c]))
	}
	for _, m := range []struct {
		field string
		rates map[string]DispatchRate
	}{
		{"topicDispatchRate", r.TopicDispatchRate}, {"clusterDispatchRate", r.ClusterDispatchRate},
		{"subscriptionDispatchRate", r.SubscriptionDispatchRate}, {"replicatorDispatchRate", r.ReplicatorDispatchRate},
	} {
		for _, c := range slices.Sorted(maps.Keys(m.rates)) {
			check(m.field, c, ValidateDispatchRate(m.rates[c]))
		}
	}
	for _, c := range slices.Sorted(maps.Keys(r.ClusterSubscribeRate)) {
		check("clusterSubscribeRate", c, ValidateSubscribeRate(r.ClusterSubscribeRate[c]))
	}
	return errs
}
