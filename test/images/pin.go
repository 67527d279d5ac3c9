package main

import (
	"fmt"
	"os"
	"path/filepath"

	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// A release's manifests name each image by its digest, not by a tag that
// can be moved: with -pin, every kustomization.yaml of the overlays under
// that directory whose images: sets one of the programs is rewritten to
// <repo>/<name>@<digest> of the archive just built. What else they hold,
// their comments included, stays as it is.

// pinned is an image as built: its repository and its index's digest.
type pinned struct{ name, digest string }

// pinOverlays pins, in each overlay directly under dir, the images of
// pins (by the program's name, which the overlays' images: use).
func pinOverlays(dir string, pins map[string]pinned) error {
	files, err := filepath.Glob(filepath.Join(dir, "*", "kustomization.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := pinFile(f, pins); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

func pinFile(path string, pins map[string]pinned) error {
	node, err := kyaml.ReadFile(path)
	if err != nil {
		return err
	}
	images, err := node.Pipe(kyaml.Lookup("images"))
	if err != nil || images == nil {
		return err
	}
	elements, err := images.Elements()
	if err != nil {
		return err
	}
	changed := false
	for _, e := range elements {
		name := e.Field("name")
		if name == nil {
			continue
		}
		p, ok := pins[kyaml.GetValue(name.Value)]
		if !ok {
			continue
		}
		// Each filter on the element: a pipe hands the next one the
		// field the last set.
		for _, f := range []kyaml.Filter{kyaml.SetField("newName", kyaml.NewStringRNode(p.name)), kyaml.Clear("newTag"), kyaml.SetField("digest", kyaml.NewStringRNode(p.digest))} {
			if err := e.PipeE(f); err != nil {
				return err
			}
		}
		changed = true
	}
	if !changed {
		return nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return err
	}
	out, err := node.String()
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(out), info.Mode())
}
