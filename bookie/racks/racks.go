// Package racks keeps a region's bookie rack and group assignments,
// Pulsar's "racks-info" (BookiesRackConfiguration): one record in the
// region's metadata store mapping each group to its bookies, and each
// bookie to a rack and a host name. The admin API writes it
// (/admin/v2/bookies/racks-info); the ledger client reads it whenever it
// places an ensemble, so a change applies to the next ledger created and
// the next ensemble change. A rack given here overrides the rack the bookie
// was configured with; a group given here overrides its configured group
// (bookie.group). docs/ledger.md describes placement.
package racks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"

	"github.com/isobar-mq/isobar/bookie/proto"
	"github.com/isobar-mq/isobar/metastore"
)

// Errors. Check them with errors.Is.
var (
	// ErrInvalid: a malformed bookie id, group, rack or host name, or a
	// change that would make the record too large.
	ErrInvalid = errors.New("racks: invalid")
	// ErrNotFound: the bookie is in no group.
	ErrNotFound = errors.New("racks: bookie not found")
)

// Info is where a bookie is, Pulsar's BookieInfo.
type Info struct {
	// Rack overrides the bookie's configured rack for placement; empty
	// keeps the configured one.
	Rack string `json:"rack,omitempty"`
	// Hostname is kept and shown, not used.
	Hostname string `json:"hostname,omitempty"`
}

// Config is the record: group → bookie id → Info. A bookie is in at
// most one group.
type Config map[string]map[string]Info

// Bounds of the record.
const (
	// MaxNameLen bounds a bookie id, group, rack and host name, in bytes.
	MaxNameLen = 255
	// MaxBookies bounds the bookies the record lists.
	MaxBookies = 4096
)

// Key is the record of region's assignments.
func Key(region string) string { return metastore.RegionPrefix(region) + "bookie-racks" }

// Lookup returns bookie's group and Info.
func (c Config) Lookup(bookie string) (group string, info Info, ok bool) {
	for g, bs := range c {
		if i, ok := bs[bookie]; ok {
			return g, i, true
		}
	}
	return "", Info{}, false
}

// Len is how many bookies the record lists.
func (c Config) Len() int {
	n := 0
	for _, bs := range c {
		n += len(bs)
	}
	return n
}

// set puts bookie in group (out of any other), as Pulsar's updateBookie.
func (c Config) set(group, bookie string, info Info) {
	c.remove(bookie)
	if c[group] == nil {
		c[group] = map[string]Info{}
	}
	c[group][bookie] = info
}

// remove takes bookie out of its group, dropping a group left empty.
func (c Config) remove(bookie string) bool {
	for g, bs := range c {
		if _, ok := bs[bookie]; ok {
			delete(bs, bookie)
			if len(bs) == 0 {
				delete(c, g)
			}
			return true
		}
	}
	return false
}

// ValidBookieID checks a bookie id as the record keys it: 1 to 255 of
// letters, digits and . _ - : [ ] (a generated id, host:port, [v6]:port).
func ValidBookieID(id string) error {
	return validName("bookie", id, func(r rune) bool { return strings.ContainsRune("._-:[]", r) })
}

// ValidGroup checks a group name: 1 to 255 of letters, digits and . _ -
// (no comma: a namespace's affinity names several groups with commas).
func ValidGroup(g string) error {
	return validName("group", g, func(r rune) bool { return strings.ContainsRune("._-", r) })
}

func validName(kind, s string, extra func(rune) bool) error {
	if s == "" {
		return fmt.Errorf("%w: %s: empty", ErrInvalid, kind)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s %.40q...: %d bytes, more than %d", ErrInvalid, kind, s, len(s), MaxNameLen)
	}
	for _, r := range s {
		if r > unicode.MaxASCII || !(unicode.IsLetter(r) || unicode.IsDigit(r) || extra(r)) {
			return fmt.Errorf("%w: %s %q: %q is not allowed", ErrInvalid, kind, s, r)
		}
	}
	return nil
}

// Validate checks the rack and host name: printable, at most 255 bytes,
// and a rack has no '/' but at its ends ("/rack-1"), Pulsar's rule for
// rack-aware placement.
func (i Info) Validate() error {
	var errs []error
	for _, f := range []struct{ name, v string }{{"rack", i.Rack}, {"hostname", i.Hostname}} {
		if len(f.v) > MaxNameLen {
			errs = append(errs, fmt.Errorf("%w: %s: %d bytes, more than %d", ErrInvalid, f.name, len(f.v), MaxNameLen))
		} else if strings.ContainsFunc(f.v, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) {
			errs = append(errs, fmt.Errorf("%w: %s %q: spaces and control characters are not allowed", ErrInvalid, f.name, f.v))
		}
	}
	if strings.Contains(strings.Trim(i.Rack, "/"), "/") {
		errs = append(errs, fmt.Errorf("%w: rack %q: Bookie 'rack' parameter is invalid, the rack name is not allowed to contain slash (`/`) except for the beginning and end of the rack name string", ErrInvalid, i.Rack))
	}
	return errors.Join(errs...)
}

// Parse decodes the record.
func Parse(b []byte) (Config, error) {
	var c Config
	if err := json.Unmarshal(b, &c); err != nil {
		return nil, fmt.Errorf("racks: malformed record: %w", err)
	}
	if c == nil {
		c = Config{}
	}
	return c, nil
}

// Read reads region's record; none is an empty Config.
func Read(ctx context.Context, m metastore.Meta, region string) (Config, error) {
	kv, err := m.Get(ctx, Key(region))
	if errors.Is(err, metastore.ErrNotFound) {
		return Config{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("racks: read: %w", err)
	}
	return Parse(kv.Value)
}

// Store reads and changes one region's record, for the admin API.
type Store struct {
	meta   metastore.Meta
	region string
}

// NewStore returns the store of region's record in m.
func NewStore(m metastore.Meta, region string) *Store { return &Store{meta: m, region: region} }

// Read reads the record.
func (s *Store) Read(ctx context.Context) (Config, error) { return Read(ctx, s.meta, s.region) }

// Set puts bookie in group with info, taking it out of any other group.
// The group need not exist before, nor the bookie be registered (it may be
// assigned before it first starts).
func (s *Store) Set(ctx context.Context, group, bookie string, info Info) error {
	if err := errors.Join(ValidGroup(group), ValidBookieID(bookie), info.Validate()); err != nil {
		return err
	}
	return s.update(ctx, func(c Config) error {
		c.set(group, bookie, info)
		if n := c.Len(); n > MaxBookies {
			return fmt.Errorf("%w: the record would list %d bookies, more than %d", ErrInvalid, n, MaxBookies)
		}
		return nil
	})
}

// Remove takes bookie out of its group; ErrNotFound when it is in none.
func (s *Store) Remove(ctx context.Context, bookie string) error {
	return s.update(ctx, func(c Config) error {
		if !c.remove(bookie) {
			return fmt.Errorf("%w: Bookie address not found: %s", ErrNotFound, bookie)
		}
		return nil
	})
}

func (s *Store) update(ctx context.Context, fn func(Config) error) error {
	_, _, err := metastore.Update(ctx, s.meta, Key(s.region), func(old []byte) ([]byte, error) {
		c := Config{}
		if old != nil {
			// A malformed record is replaced: it would otherwise stop
			// every change, the one that repairs it included.
			if p, err := Parse(old); err == nil {
				c = p
			}
		}
		if err := fn(c); err != nil {
			return nil, err
		}
		return json.Marshal(c)
	})
	return err
}

// Bookies lists the ids of the region's bookies, sorted: those with a
// cookie (started at least once and not decommissioned) and those
// registered now.
func (s *Store) Bookies(ctx context.Context) ([]string, error) {
	prefix := metastore.RegionPrefix(s.region)
	var out []string
	for _, p := range []string{proto.CookiesPrefix(prefix), proto.BookiesPrefix(prefix)} {
		keys, err := s.meta.ListKeys(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("racks: list bookies: %w", err)
		}
		for _, k := range keys {
			out = append(out, strings.TrimPrefix(k, p))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}
