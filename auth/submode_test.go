package auth

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/isobar-mq/isobar/errkind"
	"github.com/isobar-mq/isobar/topic"
)

// TestSubscriptionAuthModePrefix: with Prefix, every role but the
// superusers must use subscription names starting with the role (tenant
// admins too, as in Pulsar); without it, or on another namespace, names
// are free. Operations without a subscription are not affected.
func TestSubscriptionAuthModePrefix(t *testing.T) {
	srv, err := NewServer(Config{AuthenticationEnabled: true, AuthorizationEnabled: true,
		Token: TokenConfig{SecretKey: "data:;base64,AAAA"}, SuperUserRoles: []string{"root"}})
	if err != nil {
		t.Fatal(err)
	}
	src := grants{
		admins: map[string][]string{"acme": {"acme-admin"}},
		ns: map[string]map[string][]string{
			"acme/app":  {"reader": {"consume"}},
			"acme/free": {"reader": {"consume"}},
		},
		modes: map[string]string{"acme/app": SubscriptionAuthPrefix, "acme/free": "None"},
	}
	a := NewAuthorizer(srv, src)
	ctx := context.Background()
	app, _ := topic.Parse("persistent://acme/app/orders")
	free, _ := topic.Parse("persistent://acme/free/orders")
	for _, c := range []struct {
		role, sub string
		t         topic.Name
		ok        bool
	}{
		{"reader", "reader-audit", app, true},
		{"reader", "reader", app, true},
		{"reader", "readerX", app, true}, // Pulsar's check is a plain prefix
		{"reader", "audit", app, false},
		{"reader", "", app, true}, // no subscription (stats, say)
		{"acme-admin", "audit", app, false},
		{"acme-admin", "acme-admin-audit", app, true},
		{"root", "audit", app, true},
		{"reader", "audit", free, true},
		{"nobody", "nobody-x", app, false}, // the prefix does not grant consume
	} {
		err := a.Consume(ctx, c.role, c.t, c.sub)
		if c.ok != (err == nil) {
			t.Errorf("%s consuming %s as %q: %v, want allowed %t", c.role, c.t, c.sub, err, c.ok)
			continue
		}
		if err != nil && !errors.Is(err, errkind.ErrAuthorization) {
			t.Errorf("%s as %q: %v is not an authorization error", c.role, c.sub, err)
		}
		if err != nil && c.role != "nobody" {
			want := "The subscription name needs to be prefixed by the authentication role, like " + c.role + "-xxxx for topic: " + c.t.String()
			if !strings.Contains(errkind.MessageOf(err), want) {
				t.Errorf("%s as %q: message %q lacks Pulsar's %q", c.role, c.sub, errkind.MessageOf(err), want)
			}
		}
	}
}
