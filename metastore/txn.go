package metastore

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CmpKind is what a transaction condition checks.
type CmpKind uint8

// Condition kinds.
const (
	// CmpAbsent: the key does not exist (with Prefix: no key under it).
	CmpAbsent CmpKind = iota + 1
	// CmpPresent: the key exists.
	CmpPresent
	// CmpAtRev: the key's last change is at revision Rev (0: it is absent).
	CmpAtRev
	// CmpChangedAfter (with Prefix): there is a key under Key, and every
	// key under it last changed after revision Rev.
	CmpChangedAfter
)

// Cmp is one condition of a transaction (Meta.Txn). Build it with Absent,
// Present, AtRev, NoneUnder or AllChangedAfter.
type Cmp struct {
	Kind   CmpKind
	Key    string
	Prefix bool // CmpAbsent and CmpChangedAfter: the condition is on every key under Key
	Rev    int64
}

// Absent holds when key does not exist.
func Absent(key string) Cmp { return Cmp{Kind: CmpAbsent, Key: key} }

// Present holds when key exists.
func Present(key string) Cmp { return Cmp{Kind: CmpPresent, Key: key} }

// AtRev holds when key's last change is at revision rev (as read in
// KV.Rev); AtRev(key, 0) is Absent(key).
func AtRev(key string, rev int64) Cmp { return Cmp{Kind: CmpAtRev, Key: key, Rev: rev} }

// NoneUnder holds when no key starts with prefix.
func NoneUnder(prefix string) Cmp { return Cmp{Kind: CmpAbsent, Key: prefix, Prefix: true} }

// AllChangedAfter holds when at least one key starts with prefix and
// every such key's last change is after revision rev.
func AllChangedAfter(prefix string, rev int64) Cmp {
	return Cmp{Kind: CmpChangedAfter, Key: prefix, Prefix: true, Rev: rev}
}

func (c Cmp) String() string {
	switch c.Kind {
	case CmpAbsent:
		if c.Prefix {
			return "none under " + c.Key
		}
		return c.Key + " absent"
	case CmpPresent:
		return c.Key + " present"
	case CmpAtRev:
		return fmt.Sprintf("%s at revision %d", c.Key, c.Rev)
	case CmpChangedAfter:
		return fmt.Sprintf("every key under %s changed after revision %d", c.Key, c.Rev)
	}
	return "cmp?"
}

func (c Cmp) etcd() (clientv3.Cmp, error) {
	var cmp clientv3.Cmp
	switch c.Kind {
	case CmpAbsent:
		cmp = clientv3.Compare(clientv3.CreateRevision(c.Key), "=", 0)
	case CmpPresent:
		cmp = clientv3.Compare(clientv3.CreateRevision(c.Key), ">", 0)
	case CmpAtRev:
		cmp = clientv3.Compare(clientv3.ModRevision(c.Key), "=", c.Rev)
	case CmpChangedAfter:
		// etcd compares an empty range as one key of zero revisions, so
		// "none under the prefix" fails this, as documented.
		if !c.Prefix {
			return cmp, fmt.Errorf("metastore: transaction condition %s: a change after a revision is checked on a prefix", c)
		}
		cmp = clientv3.Compare(clientv3.ModRevision(c.Key), ">", c.Rev)
	default:
		return cmp, fmt.Errorf("metastore: transaction condition of unknown kind %d on %s", c.Kind, c.Key)
	}
	if c.Prefix {
		if c.Kind != CmpAbsent && c.Kind != CmpChangedAfter {
			return cmp, fmt.Errorf("metastore: transaction condition %s: only an absence or a change after a revision may cover a prefix", c)
		}
		cmp = cmp.WithPrefix()
	}
	return cmp, nil
}

// OpKind is what a transaction operation does.
type OpKind uint8

// Operation kinds.
const (
	OpPut OpKind = iota + 1
	OpDelete
)

// Op is one write of a transaction (Meta.Txn). Build it with PutOp or
// DeleteOp.
type Op struct {
	Kind  OpKind
	Key   string
	Value []byte
	Lease int64 // a put's lease (0: none)
}

// PutOp writes key.
func PutOp(key string, value []byte) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// PutLeasedOp writes key attached to lease id.
func PutLeasedOp(key string, value []byte, lease int64) Op {
	return Op{Kind: OpPut, Key: key, Value: value, Lease: lease}
}

// DeleteOp deletes key (absent is not an error).
func DeleteOp(key string) Op { return Op{Kind: OpDelete, Key: key} }

func (o Op) etcd() (clientv3.Op, error) {
	switch o.Kind {
	case OpPut:
		if o.Lease != 0 {
			return clientv3.OpPut(o.Key, string(o.Value), clientv3.WithLease(clientv3.LeaseID(o.Lease))), nil
		}
		return clientv3.OpPut(o.Key, string(o.Value)), nil
	case OpDelete:
		return clientv3.OpDelete(o.Key), nil
	}
	return clientv3.Op{}, fmt.Errorf("metastore: transaction operation of unknown kind %d on %s", o.Kind, o.Key)
}

// Txn applies ops atomically if every condition in conds holds, and
// reports whether they held. rev is the store's revision after it.
func (s *Store) Txn(ctx context.Context, conds []Cmp, ops []Op) (bool, int64, error) {
	cmps := make([]clientv3.Cmp, 0, len(conds))
	for _, c := range conds {
		cmp, err := c.etcd()
		if err != nil {
			return false, 0, err
		}
		cmps = append(cmps, cmp)
	}
	eops := make([]clientv3.Op, 0, len(ops))
	for _, o := range ops {
		op, err := o.etcd()
		if err != nil {
			return false, 0, err
		}
		eops = append(eops, op)
	}
	resp, err := s.cli.Txn(ctx).If(cmps...).Then(eops...).Commit()
	if err != nil {
		return false, 0, fmt.Errorf("metastore: transaction: %w", leaseErr(err))
	}
	return resp.Succeeded, resp.Header.Revision, nil
}
