package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"time"

	"github.com/creack/pty"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// serveExec is the kubelet API's /exec/NAMESPACE/POD/CONTAINER, which the
// apiserver reaches for pods/exec: the command runs in the pod as its
// containers do (labctl pod-init), and its output and exit code go back
// over the streams of the Kubernetes remote command protocol.
func (k *kubelet) serveExec(w http.ResponseWriter, req *http.Request) {
	key := req.PathValue("namespace") + "/" + req.PathValue("pod")
	dir, ok := k.podDir(key)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s does not run in the lab: only pods of %s do", key, standInNames(k.standIns)), http.StatusNotFound)
		return
	}
	opts, err := remotecommand.NewOptions(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	e := podExecutor{k: k, dir: dir}
	remotecommand.ServeExec(w, req, e, key, "", req.PathValue("container"), req.URL.Query()["command"], opts,
		4*time.Hour, remotecommand.DefaultStreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

func (k *kubelet) podDir(key string) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	p, ok := k.running[key]
	if !ok {
		return "", false
	}
	return p.dir, true
}

type podExecutor struct {
	k   *kubelet
	dir string
}

// ExecInContainer runs cmd with the streams it is given; with a terminal,
// on a pseudo-terminal whose one stream carries both outputs, as a
// container runtime does.
func (e podExecutor) ExecInContainer(ctx context.Context, _, _, container string, cmd []string, in io.Reader, out, errOut io.WriteCloser, tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	if len(cmd) == 0 {
		return errors.New("no command")
	}
	c := e.k.podInit(ctx, e.dir, container, cmd)
	if !tty {
		c.Stdin, c.Stdout, c.Stderr = in, out, errOut
		return exitError(c.Run())
	}
	// pty.Start makes the command a session leader with the terminal as
	// its controlling one; the mount namespace pod-init needs stays.
	f, err := pty.Start(c)
	if err != nil {
		return err
	}
	defer f.Close()
	go func() {
		for size := range resize {
			_ = pty.Setsize(f, &pty.Winsize{Rows: size.Height, Cols: size.Width})
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(f, in) }()
	}
	copied := make(chan struct{})
	go func() {
		// The terminal reads EIO once the command and its children have
		// closed it.
		_, _ = io.Copy(out, f)
		close(copied)
	}()
	err = c.Wait()
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	return exitError(err)
}

// exitError is err as the remote command protocol reports an exit code.
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return utilexec.ExitErrorWrapper{ExitError: ee}
	}
	return err
}
