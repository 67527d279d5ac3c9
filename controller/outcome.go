package controller

import (
	"errors"
	"slices"
	"strings"
	"sync"
)

// outcome collects what applying a plan did and what failed, by member.
// Members are applied at once, so it is guarded.
type outcome struct {
	mu                       sync.Mutex
	propagateErrs, applyErrs []string
	// unreachable members are reported, not retried: a member that comes
	// back queues every service again.
	unreachable map[string]string
	// pending are members whose writes the sync did not wait for
	// (fanout.go): the service is synced again when they end. slow are
	// those of them that are slow, and why: reported, as what their
	// writes did cannot be.
	pending []string
	slow    map[string]string
	// namesTaken are propagated Services another object of the
	// controller's holds the name of: reported, not retried, since the
	// deletion of that object queues the service.
	namesTaken []string
	// paced are providers whose changes wait for their budget (budget.go).
	paced []string
	// answered: a write of the member's was answered by its API server
	// (fanout.go: a slow member is no longer slow).
	answered bool
	// begin, when set, is told once a write of the member's begins
	// (fanout.go: a sync waits for a slow member until then).
	begin func()
}

// writing notes that a write is about to begin.
func (o *outcome) writing() {
	if o.begin != nil {
		o.begin()
	}
}

// wait notes a member whose writes the sync does not wait for, and why
// if it is slow.
func (o *outcome) wait(cluster, slow string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pending = append(o.pending, cluster)
	if slow != "" {
		if o.slow == nil {
			o.slow = map[string]string{}
		}
		o.slow[cluster] = slow
	}
}

// merge adds what another outcome collected. Errors arrive in any order;
// conditions must not change with it.
func (o *outcome) merge(other *outcome) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.propagateErrs = append(o.propagateErrs, other.propagateErrs...)
	o.applyErrs = append(o.applyErrs, other.applyErrs...)
	o.namesTaken = append(o.namesTaken, other.namesTaken...)
	slices.Sort(o.propagateErrs)
	slices.Sort(o.applyErrs)
	slices.Sort(o.namesTaken)
	for c, msg := range other.unreachable {
		if o.unreachable == nil {
			o.unreachable = map[string]string{}
		}
		o.unreachable[c] = msg
	}
}

// answer notes a write that the member's API server answered.
func (o *outcome) answer() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.answered = true
}

func (o *outcome) cannotReach(cluster string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.unreachable == nil {
		o.unreachable = map[string]string{}
	}
	o.unreachable[cluster] = err.Error()
}

func (o *outcome) propagateFailed(cluster string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if errors.Is(err, errNameTaken) {
		o.namesTaken = append(o.namesTaken, cluster+": "+err.Error())
		return
	}
	o.propagateErrs = append(o.propagateErrs, cluster+": "+err.Error())
}

func (o *outcome) applyFailed(cluster string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	// Each of joined errors (one per slice) is a cause of its own, so that
	// a condition names the first few and counts the rest.
	for _, e := range flatten(err) {
		o.applyErrs = append(o.applyErrs, cluster+": "+strings.ReplaceAll(e.Error(), "\n", "; "))
	}
}

// flatten lists the errors that joined errors hold, however nested.
func flatten(err error) []error {
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

func (o *outcome) err() error {
	if all := slices.Concat(o.propagateErrs, o.applyErrs); len(all) > 0 {
		return errors.New(strings.Join(all, "; "))
	}
	return nil
}
