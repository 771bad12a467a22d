package admin

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/isobar-mq/isobar/globalconfig/policy"
)

// decodeBool decodes a boolean body: true or false, or the same as a JSON
// string ("true"), which pulsaradmin sends for encryptionRequired and
// Pulsar's JSON reader accepts.
func decodeBool(body []byte) (bool, error) {
	var v bool
	if err := decodeStrict(body, &v); err == nil {
		return v, nil
	}
	var s string
	if json.Unmarshal(body, &s) == nil && (s == "true" || s == "false") {
		return s == "true", nil
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return false, badRequestf("empty body")
	}
	return false, badRequestf("body: %.40q is not true or false", body)
}

// decodeName decodes a body naming an enumeration value: a JSON string,
// or the bare word as curl sends it. null reports ok false.
func decodeName(body []byte) (name string, ok bool, err error) {
	b := bytes.TrimSpace(body)
	switch {
	case len(b) == 0:
		return "", false, badRequestf("empty body")
	case string(b) == "null":
		return "", false, nil
	case json.Unmarshal(b, &name) == nil:
		return name, true, nil
	}
	return strings.TrimSpace(string(b)), true, nil
}

// boolPolicy is a namespace flag (POST true/false, GET its value; Pulsar
// has no DELETE for these).
func boolPolicy(path string, field func(*policy.Policies) *bool) nsPolicy {
	return nsPolicy{
		path: path,
		get:  func(p *policy.Policies) any { return *field(p) },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			v, err := decodeBool(body)
			if err != nil {
				return err
			}
			*field(p) = v
			return nil
		},
	}
}

// schemaSecurityPolicies are the namespace's schema settings,
// subscription auth mode and encryption requirement
// (policy.SchemaAndSecurity), with Pulsar's paths, methods and answers.
var schemaSecurityPolicies = []nsPolicy{
	boolPolicy("schemaValidationEnforced", func(p *policy.Policies) *bool { return &p.SchemaValidationEnforced }),
	boolPolicy("encryptionRequired", func(p *policy.Policies) *bool { return &p.EncryptionRequired }),
	{
		// GET answers the broker's default (true) when not set, as Pulsar.
		path: "isAllowAutoUpdateSchema",
		get:  func(p *policy.Policies) any { return p.AllowsAutoUpdateSchema() },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			v, err := decodeBool(body)
			if err != nil {
				return err
			}
			p.IsAllowAutoUpdateSchema = &v
			return nil
		},
	},
	{
		// PUT, as Pulsar; null clears it. GET: 204 when not set (Pulsar
		// answers null).
		path:      "schemaAutoUpdateCompatibilityStrategy",
		setMethod: http.MethodPut,
		get: func(p *policy.Policies) any {
			if p.SchemaAutoUpdateStrategy == "" {
				return nil
			}
			return p.SchemaAutoUpdateStrategy
		},
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			name, ok, err := decodeName(body)
			if err != nil {
				return err
			}
			if !ok {
				p.SchemaAutoUpdateStrategy = ""
				return nil
			}
			v, err := policy.ParseSchemaAutoUpdateStrategy(name)
			if err != nil {
				return badRequest(err)
			}
			p.SchemaAutoUpdateStrategy = v
			return nil
		},
	},
	{
		// POST "None" or "Prefix" (null: None, as Pulsar). GET: "None"
		// when not set.
		path: "subscriptionAuthMode",
		get:  func(p *policy.Policies) any { return p.AuthMode() },
		set: func(_ *http.Request, body []byte, p *policy.Policies) error {
			name, ok, err := decodeName(body)
			if err != nil {
				return err
			}
			if !ok {
				name = policy.SubscriptionAuthNone
			}
			v, err := policy.ParseSubscriptionAuthMode(name)
			if err != nil {
				return badRequest(err)
			}
			p.SubscriptionAuthMode = v
			return nil
		},
	},
}
