package topic

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrInvalidName is wrapped by every error Parse, ParseNamespace and
// ValidTenant return. Clients are answered with the server error
// InvalidTopicName (HTTP 412): its ErrorKind method names that kind of
// package errkind, which this package, being pure, does not import.
var ErrInvalidName error = &nameError{"topic: invalid name"}

type nameError struct{ text string }

func (e *nameError) Error() string { return e.text }

// ErrorKind names ErrInvalidName's kind in errkind's table.
func (*nameError) ErrorKind() string { return "InvalidTopicName" }

// Domain says whether a topic's messages are stored.
type Domain string

// The two topic domains.
const (
	Persistent    Domain = "persistent"
	NonPersistent Domain = "non-persistent"
)

// Defaults that short topic names expand to.
const (
	DefaultTenant    = "public"
	DefaultNamespace = "default"
)

// Length limits, in bytes. They are storage's: every name Parse accepts
// can be stored, so a name is valid everywhere (admin API, binary
// protocol, managed ledger) or nowhere.
const (
	// MaxSegmentLen bounds a tenant or namespace name.
	MaxSegmentLen = 128
	// MaxNameLen bounds a topic's name as storage keeps it: its
	// managed-ledger name, StorageName, "tenant/namespace/persistent/local"
	// (two bytes shorter than the canonical full name of a persistent
	// topic), whatever the topic's domain. The managed ledger refuses
	// longer names (mledger.MaxNameLen is the same number; a test in
	// package broker checks that they agree).
	MaxNameLen = 256
	// MaxNamespaceLen bounds "tenant/namespace": a longer namespace could
	// hold no topic (its topics' storage names would pass MaxNameLen).
	MaxNamespaceLen = MaxNameLen - len("/"+string(Persistent)+"/") - 1
)

// PartitionSuffix separates a partitioned topic's base name from the
// partition index.
const PartitionSuffix = "-partition-"

// Name is a parsed, valid topic name. The zero Name is not valid. Names are
// comparable: two Names are equal when their canonical strings are.
type Name struct {
	Domain    Domain
	Tenant    string
	Namespace string // the namespace within Tenant, without the tenant
	Local     string // the topic's name within the namespace, partition suffix included
}

// Parse parses a topic name in any form the Pulsar client sends; see the
// package documentation.
func Parse(s string) (Name, error) {
	n, err := parse(s)
	if err != nil {
		return Name{}, fmt.Errorf("%w %q: %s", ErrInvalidName, s, err)
	}
	return n, nil
}

func parse(s string) (Name, error) {
	if s == "" {
		return Name{}, errors.New("empty")
	}
	domain := Persistent
	rest := s
	if d, r, ok := strings.Cut(s, "://"); ok {
		switch Domain(d) {
		case Persistent, NonPersistent:
			domain, rest = Domain(d), r
		default:
			return Name{}, fmt.Errorf("unknown domain %q (want %q or %q)", d, Persistent, NonPersistent)
		}
	}
	parts := strings.Split(rest, "/")
	var n Name
	switch {
	case len(parts) == 1 && rest == s:
		n = Name{domain, DefaultTenant, DefaultNamespace, parts[0]}
	case len(parts) == 3:
		n = Name{domain, parts[0], parts[1], parts[2]}
	case len(parts) > 3 && parts[0] == "":
		return Name{}, errors.New("empty tenant")
	case len(parts) > 3:
		return Name{}, errors.New("legacy name with a cluster (tenant/cluster/namespace/topic) is not supported, and a topic name may not contain '/'")
	default:
		return Name{}, errors.New("want [domain://]tenant/namespace/topic or a bare topic")
	}
	if err := validNamespace(n.Tenant, n.Namespace); err != nil {
		return Name{}, err
	}
	if err := validLocal(n.Local); err != nil {
		return Name{}, err
	}
	if l := n.storageLen(); l > MaxNameLen {
		return Name{}, fmt.Errorf("name is %d bytes as storage keeps it (tenant/namespace/persistent/topic), longer than %d", l, MaxNameLen)
	}
	return n, nil
}

// StorageName is the name storage keeps the topic under, its managed-ledger
// name: "tenant/namespace/persistent/local", whatever the domain (so that a
// namespace's topics share a key prefix). Parse bounds its length by
// MaxNameLen.
func (n Name) StorageName() string {
	return n.Tenant + "/" + n.Namespace + "/" + string(Persistent) + "/" + n.Local
}

func (n Name) storageLen() int {
	return len(n.Tenant) + len(n.Namespace) + len(n.Local) + len(Persistent) + 3
}

// ValidPartitions reports whether n can be a partitioned topic of count
// partitions: every partition's name, the longest being
// n.Partitioned(count-1), must be a valid name. The error wraps
// ErrInvalidName. n should be a base name; count below 1 is not checked
// here.
func (n Name) ValidPartitions(count int) error {
	if count < 1 {
		return nil
	}
	longest := n.Partitioned(count - 1)
	if l := longest.storageLen(); l > MaxNameLen {
		return fmt.Errorf("%w %q: the name of its partition %d is %d bytes as storage keeps it (tenant/namespace/persistent/topic-partition-N), longer than %d",
			ErrInvalidName, n.String(), count-1, l, MaxNameLen)
	}
	return nil
}

// String returns the canonical full name, domain://tenant/namespace/local.
func (n Name) String() string {
	return string(n.Domain) + "://" + n.Tenant + "/" + n.Namespace + "/" + n.Local
}

// NamespaceName returns "tenant/namespace".
func (n Name) NamespaceName() string {
	return n.Tenant + "/" + n.Namespace
}

// InNamespace reports whether n is in namespace ns ("tenant/namespace"),
// without building NamespaceName (a check run over every loaded topic).
func (n Name) InNamespace(ns string) bool {
	t, rest, ok := strings.Cut(ns, "/")
	return ok && t == n.Tenant && rest == n.Namespace
}

// Partition returns the partition index of a partition of a partitioned
// topic, or -1 if n does not end in a valid "-partition-N" suffix.
func (n Name) Partition() int {
	_, p := splitPartition(n.Local)
	return p
}

// Base returns the partitioned topic a partition belongs to, or n itself
// if n is not a partition.
func (n Name) Base() Name {
	n.Local, _ = splitPartition(n.Local)
	return n
}

// Partitioned returns partition i of the partitioned topic n by appending
// "-partition-i" to n's local name; n should be a base name (as with
// Pulsar's TopicName.getPartition, a partition gets a second suffix, so
// call Base first when n may be a partition). It panics if i is negative.
// The result may be longer than MaxNameLen when n is within 21 bytes of
// the limit: ValidPartitions says whether every partition's name fits.
func (n Name) Partitioned(i int) Name {
	if i < 0 {
		panic(fmt.Sprintf("topic: negative partition %d", i))
	}
	n.Local += PartitionSuffix + strconv.Itoa(i)
	return n
}

// splitPartition splits local into its base and partition index, following
// Pulsar: the index is what follows the last PartitionSuffix, and counts
// only if it is a canonical non-negative int32.
func splitPartition(local string) (string, int) {
	i := strings.LastIndex(local, PartitionSuffix)
	if i < 0 {
		return local, -1
	}
	idx := local[i+len(PartitionSuffix):]
	p, err := strconv.ParseInt(idx, 10, 32)
	if err != nil || p < 0 || strconv.FormatInt(p, 10) != idx {
		return local, -1
	}
	return local[:i], int(p)
}

// ParseNamespace parses "tenant/namespace".
func ParseNamespace(s string) (tenant, namespace string, err error) {
	t, ns, ok := strings.Cut(s, "/")
	switch {
	case !ok:
		err = errors.New("want tenant/namespace")
	case strings.Contains(ns, "/"):
		err = errors.New("legacy namespace with a cluster (tenant/cluster/namespace) is not supported")
	default:
		err = validNamespace(t, ns)
	}
	if err != nil {
		return "", "", fmt.Errorf("%w: namespace %q: %s", ErrInvalidName, s, err)
	}
	return t, ns, nil
}

// ValidTenant reports whether s is a valid tenant name, and if not, why.
func ValidTenant(s string) error {
	if err := validSegment("tenant", s); err != nil {
		return fmt.Errorf("%w: tenant %q: %s", ErrInvalidName, s, err)
	}
	return nil
}

// validNamespace checks a tenant and namespace pair.
func validNamespace(tenant, ns string) error {
	if err := validSegment("tenant", tenant); err != nil {
		return err
	}
	if err := validSegment("namespace", ns); err != nil {
		return err
	}
	if l := len(tenant) + 1 + len(ns); l > MaxNamespaceLen {
		return fmt.Errorf("tenant/namespace is %d bytes, longer than %d (its topics' names could not be stored)", l, MaxNamespaceLen)
	}
	return nil
}

func validSegment(what, s string) error {
	switch {
	case s == "":
		return fmt.Errorf("empty %s", what)
	case len(s) > MaxSegmentLen:
		return fmt.Errorf("%s is %d bytes, longer than %d", what, len(s), MaxSegmentLen)
	case s == "." || s == "..":
		return fmt.Errorf("%s may not be %q", what, s)
	}
	for i := 0; i < len(s); i++ {
		if !segmentChar(s[i]) {
			return fmt.Errorf("%s has a bad character %s at byte %d (allowed: letters, digits, and _-=:.)", what, quoteByte(s[i]), i)
		}
	}
	return nil
}

func validLocal(s string) error {
	switch {
	case s == "":
		return errors.New("empty topic")
	case s == "." || s == "..":
		return fmt.Errorf("topic may not be %q", s)
	}
	for i := 0; i < len(s); i++ {
		if !localChar(s[i]) {
			return fmt.Errorf("topic has a bad character %s at byte %d (allowed: letters, digits, and _-=:.%%~!@$&*+,;()')", quoteByte(s[i]), i)
		}
	}
	return nil
}

func wordChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_'
}

func segmentChar(c byte) bool {
	return wordChar(c) || strings.IndexByte("-=:.", c) >= 0
}

func localChar(c byte) bool {
	return segmentChar(c) || strings.IndexByte("%~!@$&*+,;()'", c) >= 0
}

// quoteByte quotes one byte of a name, escaping non-ASCII bytes as \xNN
// rather than reading them as Latin-1.
func quoteByte(c byte) string {
	if c < 0x80 {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf(`'\x%02x'`, c)
}
