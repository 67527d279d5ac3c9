package controller

import (
	"slices"

	"github.com/coredns-mcs/coredns-mcs/controller/members"
)

// A member renamed (its Secret relabelled, as the README advises for a bad
// name) is, for a while, two members that reach one API server: the old
// name retiring, the new one registered. Left to themselves, the old
// name's clean-up deletes what the new name writes there, and while the
// new name has not synced, a service the cluster alone provides has no
// provider: its import and derived-<svc> go, and come back with another
// VIP. The cluster is recognised by its identity instead
// (members.Member.Identity): the old name writes nothing more there, its
// slices in the other consumers stay until the new name provides in their
// place, and it is let go once the new name has synced. Nothing is
// deleted but the old name's slices, replaced by the new name's in the
// same sync.

// renames maps each member renamed in this run to its former name: the
// retiring member it succeeds, or, once that was let go, the one
// retireCleaned noted, unless a member registers that name again: its
// ages are then another cluster's.
func (c *Controller) renames() map[string]string {
	out := map[string]string{}
	ms := c.opts.Members.List()
	c.perMember.by.Range(func(name string, st *memberState) bool {
		if from := st.renamedFrom.Load(); from != nil && !slices.ContainsFunc(ms, func(m *members.Member) bool { return m.Name == *from }) {
			out[name] = *from
		}
		return true
	})
	for _, m := range ms {
		if succ, _ := c.successor(m); succ != nil {
			out[succ.Name] = m.Name
		}
	}
	return out
}

// successor is, for a retiring member, the member registered under
// another name that reaches the same cluster; pending while that cannot
// be told yet: a member registered since has not been probed. A member
// whose first probe failed is not known to be that cluster: the retiring
// one is cleaned as usual.
func (c *Controller) successor(m *members.Member) (succ *members.Member, pending bool) {
	if !m.Retiring() {
		return nil, false
	}
	id, known := m.Identity()
	if !known || id == "" {
		return nil, false
	}
	for _, o := range c.opts.Members.List() {
		if o == m || o.Retiring() {
			continue
		}
		switch oid, _ := o.Identity(); {
		case oid == id:
			return o, false
		case !o.ProbedOnce() && o.Kube != nil:
			pending = true // probed at once: a few seconds at most
		}
	}
	return nil, pending
}
