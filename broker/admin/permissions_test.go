package admin_test

import (
	"strings"
	"testing"
)

// The permission endpoints: Pulsar's paths, bodies and statuses; a
// refused request stores nothing.
func TestPermissions(t *testing.T) {
	e := start(t)
	const ns = "/admin/v2/namespaces/public/default"
	const tp = "/admin/v2/persistent/public/default/orders"
	e.run([]step{
		{"GET", ns + "/permissions", "", 200, `{}`, ""},
		{"POST", ns + "/permissions/alice", `["produce","consume","produce"]`, 204, "", ""},
		{"POST", ns + "/permissions/bob", `["consume"]`, 204, "", ""},
		{"GET", ns + "/permissions", "", 200, `{"alice":["consume","produce"],"bob":["consume"]}`, ""},
		// A grant replaces the role's actions.
		{"POST", ns + "/permissions/bob", `["functions"]`, 204, "", ""},
		{"GET", ns + "/permissions", "", 200, `"bob":["functions"]`, ""},
		// Bad input: 400, nothing stored.
		{"POST", ns + "/permissions/carol", `["superuser"]`, 400, "unknown action", ""},
		{"POST", ns + "/permissions/carol", `[]`, 400, "no actions", ""},
		{"POST", ns + "/permissions/carol", `{not json`, 400, "", ""},
		{"POST", ns + "/permissions/carol", ``, 400, "", ""},
		{"POST", ns + "/permissions/a%01b", `["consume"]`, 400, "control", ""},
		{"POST", ns + "/permissions/" + strings.Repeat("r", 257), `["consume"]`, 400, "more than 256", ""},
		{"GET", ns + "/permissions", "", 200, `{"alice":["consume","produce"],"bob":["functions"]}`, ""},
		// Unknown namespace: 404; a bad namespace name: 412.
		{"POST", "/admin/v2/namespaces/public/nope/permissions/carol", `["consume"]`, 404, "", ""},
		{"GET", "/admin/v2/namespaces/public/nope/permissions", "", 404, "", ""},
		{"POST", "/admin/v2/namespaces/public/b%20d/permissions/carol", `["consume"]`, 412, "", ""},
		// Revoking: an absent role is no error, as in Pulsar.
		{"DELETE", ns + "/permissions/bob", "", 204, "", ""},
		{"DELETE", ns + "/permissions/bob", "", 204, "", ""},
		{"GET", ns + "/permissions", "", 200, `{"alice":["consume","produce"]}`, ""},

		// Subscriptions.
		{"GET", ns + "/permissions/subscription", "", 200, `{}`, ""},
		{"POST", ns + "/permissions/subscription/audit", `["x","w","x"]`, 204, "", ""},
		{"GET", ns + "/permissions/subscription", "", 200, `{"audit":["w","x"]}`, ""},
		{"POST", ns + "/permissions/subscription/audit", `["y"]`, 204, "", ""},
		{"GET", ns + "/permissions/subscription", "", 200, `{"audit":["y"]}`, ""},
		{"POST", ns + "/permissions/subscription/a%20b", `["y"]`, 400, "subscription name", ""},
		{"POST", ns + "/permissions/subscription/audit2", `[]`, 400, "no roles", ""},
		{"POST", ns + "/permissions/subscription/audit2", `[""]`, 400, "empty role", ""},
		{"DELETE", ns + "/permissions/audit/nobody", "", 204, "", ""},
		{"DELETE", ns + "/permissions/audit/y", "", 204, "", ""},
		{"DELETE", ns + "/permissions/audit/y", "", 404, "no permissions", ""},
		{"GET", ns + "/permissions/subscription", "", 200, `{}`, ""},

		// Topics: GET is the namespace's grants merged with the topic's.
		{"GET", tp + "/permissions", "", 200, `{"alice":["consume","produce"]}`, ""},
		{"POST", tp + "/permissions/alice", `["functions"]`, 204, "", ""},
		{"POST", tp + "/permissions/dave", `["produce"]`, 204, "", ""},
		{"GET", tp + "/permissions", "", 200, `{"alice":["consume","functions","produce"],"dave":["produce"]}`, ""},
		{"GET", "/admin/v2/persistent/public/default/other/permissions", "", 200, `{"alice":["consume","produce"]}`, ""},
		{"GET", "/admin/v2/non-persistent/public/default/orders/permissions", "", 200, `{"alice":["consume","produce"]}`, ""},
		{"POST", "/admin/v2/non-persistent/public/default/orders/permissions/erin", `["consume"]`, 204, "", ""},
		{"GET", "/admin/v2/non-persistent/public/default/orders/permissions", "", 200, `"erin":["consume"]`, ""},
		{"POST", tp + "/permissions/dave", `["root"]`, 400, "", ""},
		{"POST", "/admin/v2/persistent/public/nope/orders/permissions/dave", `["produce"]`, 404, "", ""},
		// Revoking: 412 when the topic has no grant of its own for the role.
		{"DELETE", tp + "/permissions/dave", "", 204, "", ""},
		{"DELETE", tp + "/permissions/dave", "", 412, "not set at the topic level", ""},
		{"DELETE", "/admin/v2/persistent/public/default/other/permissions/alice", "", 412, "", ""},
		{"GET", tp + "/permissions", "", 200, `{"alice":["consume","functions","produce"]}`, ""},

		// The namespace's policies carry them in Pulsar's shape.
		{"GET", ns, "", 200, `"auth_policies":{"namespace_auth":{"alice":["consume","produce"]},"destination_auth":{"non-persistent://public/default/orders":{"erin":["consume"]},"persistent://public/default/orders":{"alice":["functions"]}}}`, ""},
	})
}
