package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// podInit is labctl pod-init DIR CONTAINER -- ARGV: it runs ARGV as a
// process of container CONTAINER of the pod in DIR (pod.go), as a
// container runtime's init does. The kubelet starts it in a mount
// namespace of its own; it joins the pod's network namespace, puts the
// pod's files where its processes look for them (resolv.conf, volumes,
// the service account's token), none of which the host sees, and then
// executes ARGV with the container's environment. It is how both the
// containers and kubectl exec start.
func podInit(dir, container string, argv []string) error {
	b, err := os.ReadFile(filepath.Join(dir, podSpecFile))
	if err != nil {
		return err
	}
	var spec podSpec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("%s: %w", podSpecFile, err)
	}
	c, ok := spec.Containers[container]
	if !ok {
		return fmt.Errorf("pod has no container %s", container)
	}
	if len(argv) == 0 {
		return errors.New("no command")
	}
	// The network namespace is the calling thread's, and execve keeps the
	// calling thread's.
	runtime.LockOSThread()
	if err := setns(filepath.Join("/run/netns", spec.Netns)); err != nil {
		return err
	}
	// Nothing mounted here may show on the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	scratch := filepath.Join(dir, "scratch")
	if err := mountScratch(scratch); err != nil {
		return err
	}
	// Every missing target first: an overlay made after a bind mount
	// beneath it would hide that mount.
	for i, m := range spec.Mounts {
		if err := makeTarget(m, filepath.Join(scratch, fmt.Sprint(i))); err != nil {
			return err
		}
	}
	for _, m := range spec.Mounts {
		if err := unix.Mount(m.Source, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("mounting %s at %s: %w", m.Source, m.Target, err)
		}
	}
	if c.Dir != "" {
		if err := os.Chdir(c.Dir); err != nil {
			return err
		}
	}
	path, err := lookPath(argv[0], c.Env)
	if err != nil {
		return err
	}
	return syscall.Exec(path, argv, c.Env)
}

// mountScratch mounts a tmpfs at dir for the overlays bindMount makes; it
// goes away with the mount namespace.
func mountScratch(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		return fmt.Errorf("mounting scratch space at %s: %w", dir, err)
	}
	return nil
}

// makeTarget makes m.Target when it does not exist on the host
// (/etc/coredns, /var/run/secrets/...): in an overlay of its nearest
// existing directory, upper layer in scratch, so that the host's file
// system is left as it is.
func makeTarget(m mount, scratch string) error {
	info, err := os.Stat(m.Source)
	if err != nil {
		return err
	}
	if _, err := os.Stat(m.Target); !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := makeInOverlay(m.Target, info.IsDir(), scratch); err != nil {
		return fmt.Errorf("making %s: %w", m.Target, err)
	}
	return nil
}

func makeInOverlay(target string, dir bool, scratch string) error {
	base := filepath.Dir(target)
	for {
		if _, err := os.Stat(base); err == nil {
			break
		}
		base = filepath.Dir(base)
	}
	base, err := filepath.EvalSymlinks(base)
	if err != nil {
		return err
	}
	upper, work := filepath.Join(scratch, "upper"), filepath.Join(scratch, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + base + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", base, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on %s: %w", base, err)
	}
	if dir {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	return os.WriteFile(target, nil, 0o644)
}

// lookPath finds file in the PATH of env, as execve's caller must.
func lookPath(file string, env []string) (string, error) {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			if err := os.Setenv("PATH", v); err != nil {
				return "", err
			}
		}
	}
	return exec.LookPath(file)
}
