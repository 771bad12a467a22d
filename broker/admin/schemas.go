package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/isobar-mq/isobar/broker/adminapi"
	"github.com/isobar-mq/isobar/globalconfig/schema"
	"github.com/isobar-mq/isobar/globalconfig/schema/compat"
	"github.com/isobar-mq/isobar/topic"
)

// The schema registry's endpoints, /admin/v2/schemas/{tenant}/{namespace}/{topic}/...,
// in Pulsar's paths and JSON (docs/schemas.md). A topic's schema is its
// partitioned topic's for a partition, and the topic need not exist.

var errNoSchemas = fmt.Errorf("%w: the schema registry is not available", adminapi.ErrUnavailable)

// getSchemaResponse is Pulsar's GetSchemaResponse.
type getSchemaResponse struct {
	Version    int64             `json:"version"`
	Type       string            `json:"type"`
	Timestamp  int64             `json:"timestamp"`
	Data       string            `json:"data"`
	Properties map[string]string `json:"properties"`
}

func schemaResponse(v schema.Version) getSchemaResponse {
	props := v.Properties
	if props == nil {
		props = map[string]string{}
	}
	return getSchemaResponse{Version: v.Version, Type: v.Type, Timestamp: v.Timestamp, Data: string(v.Data), Properties: props}
}

// postSchemaPayload is Pulsar's PostSchemaPayload.
type postSchemaPayload struct {
	Type       string            `json:"type"`
	Schema     string            `json:"schema"`
	Properties map[string]string `json:"properties"`
}

type schemaHandlerFunc func(w http.ResponseWriter, r *http.Request, name topic.Name) error

// schemaHandler resolves the topic (persistent: schemas are shared by
// both domains) and checks that its namespace exists.
func (s *Server) schemaHandler(h schemaHandlerFunc) handlerFunc {
	if s.cfg.Policies == nil {
		return absent(errNoPolicies)
	}
	if s.cfg.Schemas == nil {
		return absent(errNoSchemas)
	}
	return func(w http.ResponseWriter, r *http.Request) error {
		name, err := topic.Parse("persistent://" + r.PathValue("tenant") + "/" + r.PathValue("namespace") + "/" + r.PathValue("topic"))
		if err != nil {
			return err
		}
		if _, err := s.cfg.Policies.Namespace(r.Context(), name.NamespaceName()); err != nil {
			return err
		}
		return h(w, r, name)
	}
}

// schemaSettings are the schema settings that apply to a topic: its
// namespace's with its own over them.
func (s *Server) schemaSettings(ctx context.Context, name topic.Name) (schema.Settings, error) {
	return schema.SettingsFor(ctx, s.cfg.Policies, name)
}

// notFound makes a missing schema's reason read as Pulsar's.
func schemaNotFound(err error) error {
	if errors.Is(err, schema.ErrNotFound) {
		return fmt.Errorf("Schema not found: %w", err)
	}
	return err
}

func (s *Server) getSchema(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	v, err := s.cfg.Schemas.Latest(r.Context(), name)
	if err != nil {
		return schemaNotFound(err)
	}
	return ok(w, schemaResponse(v))
}

func (s *Server) getSchemaVersion(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	version, err := strconv.ParseInt(r.PathValue("version"), 10, 64)
	if err != nil || version < 0 {
		return badRequestf("version %q is not a schema version", r.PathValue("version"))
	}
	v, err := s.cfg.Schemas.Get(r.Context(), name, version)
	if err != nil {
		return schemaNotFound(err)
	}
	return ok(w, schemaResponse(v))
}

func (s *Server) getAllSchemas(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	vs, err := s.cfg.Schemas.All(r.Context(), name)
	if err != nil {
		return err
	}
	out := struct {
		Schemas []getSchemaResponse `json:"getSchemaResponses"`
	}{Schemas: make([]getSchemaResponse, 0, len(vs))}
	for _, v := range vs {
		out.Schemas = append(out.Schemas, schemaResponse(v))
	}
	return ok(w, out)
}

// schemaBody decodes a PostSchemaPayload; its type must be given.
func schemaBody(w http.ResponseWriter, r *http.Request) (schema.Info, error) {
	body, err := readBody(w, r)
	if err != nil {
		return schema.Info{}, err
	}
	var p postSchemaPayload
	if err := decodeStrict(body, &p); err != nil {
		return schema.Info{}, err
	}
	if p.Type == "" {
		return schema.Info{}, badRequestf("body: the schema type is required")
	}
	return schema.Info{Type: p.Type, Data: []byte(p.Schema), Properties: p.Properties}, nil
}

// postSchema adds a version if the namespace's strategy allows it (409
// otherwise); posting a schema the topic holds returns its version.
func (s *Server) postSchema(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	info, err := schemaBody(w, r)
	if err != nil {
		return err
	}
	st, err := s.schemaSettings(r.Context(), name)
	if err != nil {
		return err
	}
	v, _, err := s.cfg.Schemas.Add(r.Context(), name, st.Strategy, info)
	if err != nil {
		return err
	}
	return ok(w, map[string]int64{"version": v})
}

// deleteSchema adds a tombstone, or with force=true removes every
// version.
func (s *Server) deleteSchema(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	if boolParam(r, "force") {
		if err := s.cfg.Schemas.ForceDelete(r.Context(), name); err != nil {
			return schemaNotFound(err)
		}
		return ok(w, map[string]int64{"version": -1})
	}
	v, err := s.cfg.Schemas.Delete(r.Context(), name)
	if err != nil {
		return schemaNotFound(err)
	}
	return ok(w, map[string]int64{"version": v})
}

// testCompatibility checks a schema against the topic's without storing
// it: 200 with the answer, 400 when the schema itself is invalid.
func (s *Server) testCompatibility(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	info, err := schemaBody(w, r)
	if err != nil {
		return err
	}
	st, err := s.schemaSettings(r.Context(), name)
	if err != nil {
		return err
	}
	err = s.cfg.Schemas.Check(r.Context(), name, st.Strategy, info)
	if err != nil && !errors.Is(err, compat.ErrIncompatible) {
		return err
	}
	return ok(w, struct {
		Compatible bool            `json:"compatibility"`
		Strategy   compat.Strategy `json:"schemaCompatibilityStrategy"`
	}{err == nil, st.Strategy})
}

// schemaVersionOf returns the version that holds a schema; 404 when none
// does.
func (s *Server) schemaVersionOf(w http.ResponseWriter, r *http.Request, name topic.Name) error {
	info, err := schemaBody(w, r)
	if err != nil {
		return err
	}
	v, err := s.cfg.Schemas.Find(r.Context(), name, info)
	if err != nil {
		return schemaNotFound(err)
	}
	return ok(w, map[string]int64{"version": v})
}

// deleteNamespaceSchemas removes a deleted namespace's schemas, so that a
// namespace created again under its name starts without them. A failure
// is logged: the namespace is gone either way.
func (s *Server) deleteNamespaceSchemas(ctx context.Context, ns string) {
	if s.cfg.Schemas == nil {
		return
	}
	if err := s.cfg.Schemas.DeleteNamespace(ctx, ns); err != nil {
		s.log.Warn("deleting the schemas of a deleted namespace failed", "namespace", ns, "err", err)
	}
}
