// Package shards splits the services among mcs-controller's replicas.
//
// A service's key (namespace/name) falls into one of Buckets buckets, an
// FNV-32a hash of it; the objects the controller writes for a service
// carry its bucket (api.LabelBucket). With N shards, bucket b is shard
// b mod N's, so that N can change without relabelling anything. A replica
// holds the shards whose Lease it holds (elect.go), syncs only their
// services, and lists only their objects (Selector).
package shards

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/coredns-mcs/coredns-mcs/api"
)

// Buckets is how many buckets services fall into, and so the most shards
// there may be.
const Buckets = 64

// Bucket is the bucket of service namespace/name.
func Bucket(namespace, name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace + "/" + name))
	return int(h.Sum32() % Buckets)
}

// Label is the value of api.LabelBucket on the objects of service
// namespace/name.
func Label(namespace, name string) string { return strconv.Itoa(Bucket(namespace, name)) }

// Set is the shards of this replica: those it wants (it took their
// Lease) and those it holds (its informers list their objects too, so
// their services may be synced). Safe for concurrent use.
type Set struct {
	n            int
	want, holder atomic.Uint64 // bit i: shard i
}

// NewSet is the shards of a replica among n, holding none; n is checked
// by Valid.
func NewSet(n int) *Set { return &Set{n: n} }

// Valid says why n shards cannot be, or nil.
func Valid(n int) error {
	if n < 1 || n > Buckets {
		return fmt.Errorf("--shards %d: want 1 to %d", n, Buckets)
	}
	return nil
}

// N is the number of shards.
func (s *Set) N() int { return s.n }

// Want adds shard i to those the informers list.
func (s *Set) Want(i int) { s.want.Or(1 << i) }

// Wants reports whether shard i is wanted: taken, listed or not.
func (s *Set) Wants(i int) bool { return s.want.Load()&(1<<i) != 0 }

// Hold makes the shards wanted held, listed or not.
func (s *Set) Hold() { s.holder.Store(s.want.Load()) }

// HoldSelected makes the shards wanted held if sel is still their
// selector: the informers list them once listed with sel. False when a
// shard was wanted since.
func (s *Set) HoldSelected(sel string) bool {
	want := s.want.Load()
	if s.selectorOf(want) != sel {
		return false
	}
	s.holder.Store(want)
	return true
}

// Held is how many shards are held.
func (s *Set) Held() int { return bits.OnesCount64(s.holder.Load()) }

// Holds reports whether shard i is held.
func (s *Set) Holds(i int) bool { return s.holder.Load()&(1<<i) != 0 }

// Owns reports whether the service namespace/name is of a held shard.
func (s *Set) Owns(namespace, name string) bool {
	return s.Holds(Bucket(namespace, name) % s.n)
}

// Selector is the label selector of the objects the informers list: all
// but those of the buckets of shards not wanted. Objects without the
// label (the members' own, or the controller's written before it had
// one) are listed by every replica. "" when every shard is wanted.
func (s *Set) Selector() string { return s.selectorOf(s.want.Load()) }

func (s *Set) selectorOf(want uint64) string {
	var others []string
	for b := range Buckets {
		if want&(1<<(b%s.n)) == 0 {
			others = append(others, strconv.Itoa(b))
		}
	}
	if len(others) == 0 {
		return ""
	}
	return api.LabelBucket + " notin (" + strings.Join(others, ",") + ")"
}
