package main

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// How kubectl mcs verify asks: each probe is a command exec-ed in the
// consumer's client pod (dig for a name, through the pod's resolv.conf to
// the cluster DNS; nc for a connection, through the node's kube-proxy),
// tried until it answers as the plan says or the run's timeout passes.

// execFunc runs cmd in pod ns/name of cluster and returns its standard
// output; a command that exits non-zero is an error holding its output.
type execFunc func(ctx context.Context, cluster, ns, pod string, cmd []string) (string, error)

// podExec is execFunc through the members' API servers, as kubectl exec.
func podExec(configs map[string]*rest.Config) execFunc {
	return func(ctx context.Context, cluster, ns, pod string, cmd []string) (string, error) {
		cfg := configs[cluster]
		kube, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return "", err
		}
		req := kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
		exec, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
		if err != nil {
			return "", err
		}
		var stdout, stderr bytes.Buffer
		err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
		var exit utilexec.ExitError
		if errors.As(err, &exit) {
			return stdout.String(), fmt.Errorf("exit %d: %s", exit.ExitStatus(), strings.TrimSpace(stdout.String()+" "+stderr.String()))
		}
		return stdout.String(), err
	}
}

// probeAll runs ps in order; phase names them in the table ("failover").
func (r *verifyRun) probeAll(ctx context.Context, ps []probe, phase string) []VerifyCheck {
	var out []VerifyCheck
	for _, p := range ps {
		if ctx.Err() != nil {
			break
		}
		out = append(out, r.probe(ctx, p, phase))
	}
	return out
}

// probe asks p until its answer is the one wanted, or the timeout.
func (r *verifyRun) probe(ctx context.Context, p probe, phase string) VerifyCheck {
	c := VerifyCheck{Cluster: p.cluster, Check: strings.TrimSpace(phase + " " + p.check()), Target: p.name, Want: p.want, About: p.about}
	if p.problem != "" {
		c.Problem = p.problem
		return c
	}
	start := time.Now()
	var last error
	err := wait.PollUntilContextTimeout(ctx, r.poll, r.timeout, true, func(ctx context.Context) (bool, error) {
		got, err := r.ask(ctx, p)
		if last = keep(ctx, last, err); err == nil {
			c.Got, last = got, p.compare(got)
		}
		return err == nil && last == nil, nil
	})
	if err == nil {
		c.OK, c.Seconds = true, time.Since(start).Round(100*time.Millisecond).Seconds()
		return c
	}
	c.Problem = fmt.Sprintf("after %s: %v", r.timeout, cmp.Or(last, err))
	return c
}

// compare: a name's records are exactly want; a connection reached one of
// want's clusters.
func (p *probe) compare(got []string) error {
	if p.qtype != 0 {
		if !slices.Equal(got, p.want) {
			return fmt.Errorf("answers %s, want %s", orNone(strings.Join(got, ", ")), orNone(strings.Join(p.want, ", ")))
		}
		return nil
	}
	if len(got) == 0 || !slices.Contains(p.want, got[0]) {
		return fmt.Errorf("reached %s, want %s", orNone(strings.Join(got, ", ")), cmp.Or(strings.Join(p.want, " or "), "a provider with its server ready, and there is none"))
	}
	return nil
}

// ask runs p once in its consumer's client.
func (r *verifyRun) ask(ctx context.Context, p probe) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second) // an exec that hangs must not hang the run
	defer cancel()
	if p.qtype == 0 {
		out, err := r.exec(ctx, p.cluster, r.namespace, verifyClient, connectCommand(p.name))
		if err != nil {
			return nil, fmt.Errorf("no connection: %w", err)
		}
		return reachedCluster(out)
	}
	out, err := r.exec(ctx, p.cluster, r.namespace, verifyClient, digCommand(p.name, p.qtype))
	if err != nil {
		return nil, fmt.Errorf("dig: %w", err)
	}
	return digRecords(out)
}

func digCommand(name string, qtype uint16) []string {
	return []string{"dig", "+time=2", "+tries=2", "+noall", "+comments", "+answer", name, dns.TypeToString[qtype]}
}

func connectCommand(name string) []string {
	return []string{"/bin/sh", "-c", "echo verify | nc -v -w 3 " + name + " " + strconv.Itoa(verifyPort)} // -v: why it failed, on stderr
}

var digStatus = regexp.MustCompile(`status: ([A-Z]+)`)

// digRecords are the records in dig's answer section, sorted: an address,
// or an SRV's "target port" (a CNAME is left out: dig follows it); a
// status other than NOERROR is an error.
func digRecords(out string) ([]string, error) {
	status := digStatus.FindStringSubmatch(out)
	switch {
	case status == nil:
		return nil, fmt.Errorf("no answer: %q", strings.TrimSpace(out))
	case status[1] != "NOERROR":
		return nil, fmt.Errorf("answers %s", status[1])
	}
	var got []string
	for _, line := range strings.Split(out, "\n") {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil || rr == nil {
			return nil, fmt.Errorf("a record dig printed: %q: %v", line, err)
		}
		switch rr := rr.(type) {
		case *dns.A:
			got = append(got, rr.A.String())
		case *dns.AAAA:
			got = append(got, rr.AAAA.String())
		case *dns.SRV:
			got = append(got, rr.Target+" "+strconv.Itoa(int(rr.Port)))
		}
	}
	slices.Sort(got)
	return got, nil
}

// reachedCluster is the cluster the server names in its reply: "mcs-verify
// <cluster> <pod>".
func reachedCluster(out string) ([]string, error) {
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != "mcs-verify" {
		return nil, fmt.Errorf("no reply from a server of verify: %q", strings.TrimSpace(out))
	}
	return []string{f[1]}, nil
}

// failover scales each consumer's own server, where it has one and another
// provider serves too, to zero: its native LocalFirst name must answer the
// others', and a connection reach them; then back to one, and its own
// again.
func (r *verifyRun) failover(ctx context.Context, o *observed) []VerifyCheck {
	var out []VerifyCheck
	for _, c := range o.consumers {
		if len(o.servers[c]) == 0 || len(o.serving()) < 2 || ctx.Err() != nil {
			continue
		}
		target := r.namespace + "/" + verifyServer
		err := r.scale(ctx, c, 0)
		if err == nil {
			err = r.gone(ctx, c)
		}
		out = append(out, stepCheck(c, "failover: server scaled to 0", target, "", err))
		if err != nil {
			continue
		}
		out = append(out, r.probeAll(ctx, o.withoutServer(c).failoverPlan(c), "failover")...)
		var ips []string
		if err = r.scale(ctx, c, 1); err == nil {
			ips, err = r.ready(ctx, c, "server", 1)
		}
		out = append(out, stepCheck(c, "failback: server ready again", target, strings.Join(ips, ", "), err))
		if err != nil {
			continue
		}
		o.servers[c] = ips
		out = append(out, r.probeAll(ctx, o.failoverPlan(c), "failback")...)
	}
	return out
}

// stepCheck is a step of the run as a check: ok, or its error.
func stepCheck(cluster, check, target, got string, err error) VerifyCheck {
	c := VerifyCheck{Cluster: cluster, Check: check, Target: target, OK: err == nil}
	if got != "" {
		c.Got = []string{got}
	}
	if err != nil {
		c.Problem = err.Error()
	}
	return c
}
