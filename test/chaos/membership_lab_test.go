//go:build lab

package chaos

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/coredns-mcs/coredns-mcs/api"
	"github.com/coredns-mcs/coredns-mcs/controller/credentials"
)

// Membership as users manage it: kubectl mcs join and unjoin
// (docs/install.md), the member's own account and the admission policy as
// shipped in deploy/member.
const (
	// unjoinTimeout is unjoin's wait for the controller to clean the
	// member; past it unjoin deletes what is left itself. Shorter than
	// its default (2 minutes): a run lasts minutes.
	unjoinTimeout = 20 * time.Second
	// rejoinFor bounds the retries of a join that heals a fault, while a
	// fault of the hub keeps it from writing the Secret.
	rejoinFor = 2 * time.Minute
	// kubectlTimeout is kubectl's --request-timeout: a frozen API server
	// holds a request for ever.
	kubectlTimeout = "10s"
)

// kubectlMCS runs bin/kubectl-mcs with the lab's kubeconfig, whose
// contexts are named after the clusters.
func (r *run) kubectlMCS(ctx context.Context, args ...string) error {
	args = append(args, "--kubeconfig", r.l.Kubeconfig(), "--request-timeout", kubectlTimeout)
	out, err := exec.CommandContext(ctx, r.mcsBin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl mcs %s: %w: %s", args[0], err, strings.TrimSpace(string(out)))
	}
	return nil
}

// join registers member c as docs/install.md does, with the server the
// controllers reach it at: its proxy, which a partition cuts.
func (r *run) join(ctx context.Context, c string) error {
	return r.kubectlMCS(ctx, "join", c, "--context", c, "--hub-context", hub, "--controller-namespace", r.own,
		"--member-server", "https://"+r.proxies[c].Addr())
}

// joinAll registers every member, and unjoins them when the test ends,
// after the controllers stopped (so at once, --timeout 0): the shared lab
// keeps no member account of the run.
func (r *run) joinAll(t *testing.T) {
	for _, c := range members {
		if err := r.join(t.Context(), c); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.kubectlMCS(ctx, "unjoin", c, "--context", c, "--hub-context", hub, "--controller-namespace", r.own, "--timeout", "0"); err != nil {
				t.Errorf("chaos: leaving the lab: %v", err)
			}
		})
	}
}

// joinAgain joins member c again, retrying while a fault of the hub keeps
// join from finishing; a member it cannot join fails the run.
func (r *run) joinAgain(t *testing.T, c string) {
	deadline := time.Now().Add(rejoinFor)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := r.join(ctx, c)
		cancel()
		switch {
		case err == nil:
			return
		case time.Now().After(deadline):
			t.Errorf("chaos: harness: %s could not be joined again for %s: %v", c, rejoinFor, err)
			return
		}
		time.Sleep(time.Second)
	}
}

// membershipFault carries out a revoke-token or a rejoin of a member; an
// error means nothing was done (the fault was not injected).
func (r *run) membershipFault(t *testing.T, e Event) error {
	var err error
	if e.Kind == RevokeToken {
		err = r.revokeToken(e.Cluster)
	} else {
		err = r.unjoin(t, e.Cluster)
	}
	if err != nil {
		return err
	}
	time.Sleep(e.For)
	r.joinAgain(t, e.Cluster)
	return nil
}

// revokeToken revokes every token of member c's account as an operator
// revokes a stolen one (docs/install.md, "Rotating the token"): the
// ServiceAccount deleted; the join that heals the fault makes it anew.
func (r *run) revokeToken(c string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return r.l.Client(r.t, c).CoreV1().ServiceAccounts(credentials.Namespace).Delete(ctx, credentials.ServiceAccount, metav1.DeleteOptions{})
}

// unjoin takes member c's registration back with kubectl mcs unjoin. Its
// first step deletes the hub's Secret: while that stands, unjoin changed
// nothing; once it is gone, a later step that failed (another member's
// Lease, with that member down) leaves the member unjoined all the same.
func (r *run) unjoin(t *testing.T, c string) error {
	ctx, cancel := context.WithTimeout(context.Background(), unjoinTimeout+30*time.Second)
	defer cancel()
	err := r.kubectlMCS(ctx, "unjoin", c, "--context", c, "--hub-context", hub, "--controller-namespace", r.own, "--timeout", unjoinTimeout.String())
	if err == nil {
		return nil
	}
	if registered, known := r.registered(c); !known || registered {
		return err
	}
	t.Logf("chaos: %s is unjoined, but: %v", c, err)
	return nil
}

// registered reports whether the hub holds member c's Secret; known is
// false when the hub did not answer for 20 s.
func (r *run) registered(c string) (registered, known bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		_, err := r.l.Client(r.t, hub).CoreV1().Secrets(r.own).Get(ctx, c, metav1.GetOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return err == nil, true
		}
		time.Sleep(time.Second)
	}
	return false, false
}

// readAway records in m the members the hub registers no more: those
// without a Secret labelled with their name in the controller's namespace.
func (r *run) readAway(ctx context.Context, m *Sample) error {
	list, err := r.l.Client(r.t, hub).CoreV1().Secrets(r.own).List(ctx, metav1.ListOptions{LabelSelector: api.LabelCluster})
	if err != nil {
		return err
	}
	var joined []string
	for _, s := range list.Items {
		if s.DeletionTimestamp == nil {
			joined = append(joined, s.Labels[api.LabelCluster])
		}
	}
	m.Away = slices.DeleteFunc(slices.Clone(members), func(c string) bool { return slices.Contains(joined, c) })
	if len(m.Away) == 0 {
		m.Away = nil
	}
	return nil
}
