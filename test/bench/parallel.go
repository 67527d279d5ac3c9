package main

import (
	"context"
	"log"
	"sync"
	"time"
)

// parallel calls fn for 0..n-1 from workers goroutines and returns the
// first error, or ctx's; p, when not nil, logs the progress.
func parallel(ctx context.Context, workers, n int, p *progress, fn func(int) error) error {
	jobs := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range jobs {
				if err := fn(i); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	err := feed(ctx, jobs, errs, n, p)
	close(jobs)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs: // a failure after the last hand-out
		default:
		}
	}
	return err
}

// feed hands out 0..n-1 until a worker fails or ctx ends.
func feed(ctx context.Context, jobs chan<- int, errs <-chan error, n int, p *progress) error {
	for i := range n {
		select {
		case jobs <- i:
			p.step()
		case err := <-errs:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
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
