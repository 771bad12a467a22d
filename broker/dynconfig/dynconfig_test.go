package dynconfig

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        error
	}{
		{MaxProducersPerTopic, "0", nil},
		{MaxProducersPerTopic, "2147483647", nil},
		{MaxProducersPerTopic, "2147483648", ErrInvalid},
		{MaxProducersPerTopic, "-1", ErrInvalid},
		{MaxConsumersPerTopic, "1.5", ErrInvalid},
		{MaxTopicsPerNamespace, "", ErrInvalid},
		// Booleans read as Pulsar reads them: any value is accepted.
		{AllowAutoSubscriptionCreation, "true", nil},
		{AllowAutoSubscriptionCreation, `{"key/123":"https://example.com/"}`, nil},
		{AllowAutoSubscriptionCreation, strings.Repeat("x", MaxValueLen+1), ErrInvalid},
		{"brokerServicePort", "6650", ErrUnknown},
		{"", "", ErrUnknown},
	} {
		if err := Check(c.name, c.value); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Check(%q, %.20q) = %v, want %v", c.name, c.value, err, c.want)
		}
	}
}

func TestValues(t *testing.T) {
	v, err := Parse([]byte(`{"maxProducersPerTopic":"3","maxConsumersPerTopic":"x","allowAutoSubscriptionCreation":"TRUE","gone":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := v["gone"]; ok {
		t.Error("a setting that is not dynamic was kept")
	}
	if n, ok := v.Int(MaxProducersPerTopic); !ok || n != 3 {
		t.Errorf("maxProducersPerTopic = %d %v", n, ok)
	}
	if _, ok := v.Int(MaxConsumersPerTopic); ok {
		t.Error("a malformed value reads as set")
	}
	if !v.Bool(AllowAutoSubscriptionCreation, false) || Values(nil).Bool(AllowAutoSubscriptionCreation, true) != true {
		t.Error("booleans")
	}
	if v, err := Parse([]byte("null")); err != nil || v == nil {
		t.Errorf("Parse(null) = %v, %v", v, err)
	}
	if _, err := Parse([]byte("[")); err == nil {
		t.Error("a malformed record parses")
	}
	if !slices.IsSorted(Names()) {
		t.Error("settings are not in name order")
	}
}
