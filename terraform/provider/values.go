package provider

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/url"
	"slices"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/setdefault"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"

	"github.com/isobar-mq/isobar/topic"
)

// stringSet is a set of strings as Terraform holds it; nil and empty are
// both the empty set (the server answers [] for "none").
func stringSet(ss []string) types.Set {
	vs := make([]attr.Value, 0, len(ss))
	for _, s := range ss {
		vs = append(vs, types.StringValue(s))
	}
	return types.SetValueMust(types.StringType, vs)
}

// setStrings returns a set's strings, sorted; a null or unknown set has
// none.
func setStrings(ctx context.Context, s types.Set) []string {
	out := []string{}
	if s.IsNull() || s.IsUnknown() {
		return out
	}
	s.ElementsAs(ctx, &out, false)
	slices.Sort(out)
	return out
}

// emptySet is the default of optional sets: leaving one out means none.
var emptySet = setdefault.StaticValue(types.SetValueMust(types.StringType, []attr.Value{}))

// known reports whether v has a value at plan time.
func known(v attr.Value) bool { return !v.IsNull() && !v.IsUnknown() }

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

// nameValidator checks a name with the server's own rule (package topic),
// so a bad name is refused at plan time with the reason the server
// would give.
type nameValidator struct {
	what  string
	check func(string) error
}

func (v nameValidator) Description(context.Context) string {
	return "a valid " + v.what + " name"
}

func (v nameValidator) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }

func (v nameValidator) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if !known(req.ConfigValue) {
		return
	}
	if err := v.check(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid "+v.what+" name", err.Error())
	}
}

// The name rules: tenants and clusters share the tenant-name rule (as
// the server's store does), namespaces are checked with their tenant,
// topics by their full name.
var (
	validTenant  = nameValidator{"tenant", topic.ValidTenant}
	validCluster = nameValidator{"cluster", func(s string) error {
		if err := topic.ValidTenant(s); err != nil {
			return errors.New(strings.Replace(err.Error(), "tenant", "cluster", 2))
		}
		return nil
	}}
	validNamespaceSegment = nameValidator{"namespace", func(s string) error {
		if strings.Contains(s, "/") {
			return fmt.Errorf("namespace %q: a namespace's name may not contain '/' (give the tenant apart)", s)
		}
		// Checked with a stand-in tenant (the attribute is checked
		// alone), which the message must not show as if it were the
		// configuration's.
		if _, _, err := topic.ParseNamespace("t/" + s); err != nil {
			return errors.New(strings.Replace(err.Error(), fmt.Sprintf("%q", "t/"+s), fmt.Sprintf("%q", s), 1))
		}
		return nil
	}}
)

// oneOf checks that a string is one of a few values.
type oneOf []string

func (o oneOf) Description(context.Context) string {
	return "one of " + strings.Join(o, ", ")
}

func (o oneOf) MarkdownDescription(ctx context.Context) string { return o.Description(ctx) }

func (o oneOf) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if known(req.ConfigValue) && !slices.Contains(o, req.ConfigValue.ValueString()) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid value", req.ConfigValue.ValueString()+" is not "+o.Description(ctx))
	}
}

// int64Range checks that a number is within min..max.
type int64Range struct{ min, max int64 }

// atLeast checks that a number is min or more.
func atLeast(min int64) int64Range { return int64Range{min, math.MaxInt64} }

func (r int64Range) Description(context.Context) string {
	if r.max == math.MaxInt64 {
		return fmt.Sprintf("at least %d", r.min)
	}
	return fmt.Sprintf("from %d to %d", r.min, r.max)
}

func (r int64Range) MarkdownDescription(ctx context.Context) string { return r.Description(ctx) }

func (r int64Range) ValidateInt64(ctx context.Context, req validator.Int64Request, resp *validator.Int64Response) {
	if v := req.ConfigValue; known(v) && (v.ValueInt64() < r.min || v.ValueInt64() > r.max) {
		resp.Diagnostics.AddAttributeError(req.Path, "Value out of range", fmt.Sprintf("%d is not %s", v.ValueInt64(), r.Description(ctx)))
	}
}

// float64AtLeast checks that a number is min or more.
type float64AtLeast float64

func (f float64AtLeast) Description(context.Context) string {
	return fmt.Sprintf("at least %v", float64(f))
}

func (f float64AtLeast) MarkdownDescription(ctx context.Context) string { return f.Description(ctx) }

func (f float64AtLeast) ValidateFloat64(ctx context.Context, req validator.Float64Request, resp *validator.Float64Response) {
	if v := req.ConfigValue; known(v) && !(v.ValueFloat64() >= float64(f)) {
		resp.Diagnostics.AddAttributeError(req.Path, "Value out of range", fmt.Sprintf("%v is not %s", v.ValueFloat64(), f.Description(ctx)))
	}
}

// keysOneOf checks that every key of a map is one of a few values.
type keysOneOf []string

func (o keysOneOf) Description(context.Context) string {
	return "keys one of " + strings.Join(o, ", ")
}

func (o keysOneOf) MarkdownDescription(ctx context.Context) string { return o.Description(ctx) }

func (o keysOneOf) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if !known(req.ConfigValue) {
		return
	}
	for _, k := range slices.Sorted(maps.Keys(req.ConfigValue.Elements())) {
		if !slices.Contains(o, k) {
			resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(k), "Invalid key", fmt.Sprintf("%q is not one of %s", k, strings.Join(o, ", ")))
		}
	}
}

// notEmptyMap refuses a map without elements, saying why (hint): a null
// map and an empty one would read back the same.
type notEmptyMap struct{ hint string }

func (n notEmptyMap) Description(context.Context) string { return "at least one element" }

func (n notEmptyMap) MarkdownDescription(ctx context.Context) string { return n.Description(ctx) }

func (n notEmptyMap) ValidateMap(_ context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if known(req.ConfigValue) && len(req.ConfigValue.Elements()) == 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Empty map", n.hint)
	}
}

// joinCode lists values as Markdown code: a`, `b (inside a pair of
// backquotes).
func joinCode(values []string) string { return strings.Join(values, "`, `") }
