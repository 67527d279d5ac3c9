package main

import (
	"context"
	"log"
	"time"

	"golang.org/x/sync/errgroup"
)

// parallel calls fn for 0..n-1 from at most workers goroutines and
// returns the first error, or ctx's; it hands out no more once either
// happened. p, when not nil, logs the progress.
func parallel(ctx context.Context, workers, n int, p *progress, fn func(int) error) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if gctx.Err() != nil {
			break
		}
		g.Go(func() error { return fn(i) })
		p.step()
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return ctx.Err()
}

// progress logs how far a long phase has got, every 10%.
type progress struct {
	what  string
	total int
	done  int
	start time.Time
}

func newProgress(what string, total int) *progress {
	return &progress{what: what, total: total, start: time.Now()}
}

func (p *progress) step() {
	if p == nil {
		return
	}
	p.done++
	if p.total >= 1000 && p.done%(p.total/10) == 0 {
		log.Printf("%s: %d of %d (%s)", p.what, p.done, p.total, time.Since(p.start).Round(time.Second))
	}
}
