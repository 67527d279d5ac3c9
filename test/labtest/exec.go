package labtest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// Exec runs cmd in the first container of pod ns/name of cluster, as
// kubectl exec does (through the apiserver to the lab's kubelet, which
// runs the pods of some images for real; test/lab/README.md), and returns
// its output, standard error after standard output, and its exit code. An
// error is one of the way there, not of the command.
func (l *Lab) Exec(ctx context.Context, t testing.TB, cluster, ns, name string, cmd ...string) (out string, code int, err error) {
	t.Helper()
	c := l.clusterClients(t, cluster)
	req := c.kube.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(name).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(c.config, "POST", req.URL())
	if err != nil {
		return "", 0, err
	}
	var stdout, stderr bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &stdout, Stderr: &stderr})
	out = stdout.String() + stderr.String()
	var exit utilexec.ExitError
	if errors.As(err, &exit) {
		return out, exit.ExitStatus(), nil
	}
	return out, 0, err
}
