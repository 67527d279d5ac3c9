package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// bench runs the phases against the running processes.
type bench struct {
	w           *world
	watch       watches
	consumers   []string // the consumption clusters now
	procs       *processes
	dns         *resolver
	metricsURLs []string // one per replica of the controller
}

// phase is what one phase measured.
type phase struct {
	name      string
	changes   int             // source changes made (services, for the initial sync)
	perChange bool            // its figures are per change, not per service
	seen      []time.Duration // per change: source update acknowledged → imported slice seen in every consumer
	answered  []time.Duration // per change: acknowledged → coredns-mcs answers the new addresses
	took      time.Duration   // first write (controller start, for the initial sync) → last answer
	acked     time.Duration   // burst: first write → last one acknowledged
	writes    []writeCount    // mcs_writes_total during the phase
	timings   []timing        // the controller's histograms during the phase
	cpu       float64         // the controller's CPU seconds during the phase
}

// unit is what the phase's figures are per.
func (p *phase) unit() string {
	if p.perChange {
		return "change"
	}
	return "service"
}

// arrival is when one change was seen by the watch and answered by DNS.
type arrival struct{ seen, answered time.Time }

// converge waits until the controller, started over the objects, has
// imported every service into every consumer and coredns-mcs answers each one's
// addresses: the initial sync, counted from the controller's start.
func (b *bench) converge(ctx context.Context) (*phase, error) {
	n := b.w.opts.services
	p := &phase{name: "initial sync", changes: n}
	log.Printf("waiting until %d services are imported into %s and answered", n, strings.Join(b.consumers, " and "))
	ctx, cancel := context.WithTimeout(ctx, b.w.opts.convergeTimeout)
	defer cancel()
	arrivals := make([]arrival, n)
	var done atomic.Int64
	stopProgress := progress(func() string { return fmt.Sprintf("%d of %d services imported and answered", done.Load(), n) })
	defer stopProgress()
	g, gctx := errgroup.WithContext(ctx)
	for i := range n {
		want := answerOf(b.w.addresses(i, b.w.versions[i]))
		ats := b.watch.await(b.consumers, importedName(i), want)
		g.Go(func() (err error) {
			if arrivals[i], err = b.follow(gctx, i, ats, want, false); err == nil {
				done.Add(1)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("%d of %d services imported and answered: %w", done.Load(), n, err)
	}
	p.took = last(arrivals).Sub(b.procs.controllerStarted)
	after, err := b.settle(ctx)
	if err != nil {
		return nil, err
	}
	p.writes, p.timings, p.cpu = after.since(&scrape{}), after.timingsSince(&scrape{}), after.cpu
	log.Printf("initial sync done in %s", p.took.Round(time.Millisecond))
	return p, nil
}

// progressEvery is how often a long phase says how far it is.
const progressEvery = time.Minute

// progress logs what every progressEvery until stopped: at 10,000
// services the initial sync takes many minutes.
func progress(what func() string) (stop func()) {
	t := time.NewTicker(progressEvery)
	quit := make(chan struct{})
	go func() {
		for {
			select {
			case <-t.C:
				log.Print(what())
			case <-quit:
				return
			}
		}
	}()
	return func() { t.Stop(); close(quit) }
}

// restart stops the controller and starts it over the unchanged world, as
// a rollout does, and counts what it writes until it has synced every
// service once and is quiet (target: nothing but Leases).
func (b *bench) restart(ctx context.Context) (*phase, error) {
	p := &phase{name: "restart", changes: b.w.opts.services}
	log.Printf("restarting the controller over the unchanged world")
	if err := b.procs.restartControllers(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, b.w.opts.convergeTimeout)
	defer cancel()
	for {
		s, err := b.scrape(ctx)
		if err != nil {
			return nil, err
		}
		if s.synced() >= uint64(p.changes) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%d of %d services synced after the restart: %w", s.synced(), p.changes, ctx.Err())
		case <-time.After(scrapeEvery):
		}
	}
	p.took = time.Since(b.procs.controllerStarted)
	after, err := b.settle(ctx)
	if err != nil {
		return nil, err
	}
	p.writes, p.timings, p.cpu = after.since(&scrape{}), after.timingsSince(&scrape{}), after.cpu
	log.Printf("restarted controller synced every service in %s", p.took.Round(time.Millisecond))
	return p, nil
}

// singleChanges makes -changes changes one at a time, round-robin over the
// services, and times each from the acknowledgement of the source update;
// the watch and DNS polling run side by side.
func (b *bench) singleChanges(ctx context.Context) (*phase, error) {
	p := &phase{name: "single changes", changes: b.w.opts.changes, perChange: true}
	log.Printf("making %d single changes", p.changes)
	return p, b.observe(ctx, p, func() error {
		for c := range p.changes {
			i := c % b.w.opts.services
			cctx, cancel := context.WithTimeout(ctx, b.w.opts.changeTimeout)
			ack, a, err := b.change(cctx, i)
			cancel()
			if err != nil {
				return fmt.Errorf("change %d (%s): %w", c+1, serviceName(i), err)
			}
			p.seen = append(p.seen, a.seen.Sub(ack))
			p.answered = append(p.answered, a.answered.Sub(ack))
		}
		return nil
	})
}

// burst changes every service at once, -workers writes in parallel, and
// waits until every answer is new. A name is polled from when the watch saw
// its slice change: polling every name from the start would take a core
// from the processes measured.
func (b *bench) burst(ctx context.Context) (*phase, error) {
	n := b.w.opts.services
	p := &phase{name: "burst", changes: n, perChange: true}
	log.Printf("changing all %d services at once", n)
	return p, b.observe(ctx, p, func() error {
		ctx, cancel := context.WithTimeout(ctx, b.w.opts.burstTimeout)
		defer cancel()
		acks, arrivals := make([]time.Time, n), make([]arrival, n)
		followers, fctx := errgroup.WithContext(ctx)
		start := time.Now()
		err := forEach(fctx, b.w.opts.workers, n, func(ctx context.Context, i int) error {
			v, want, ats := b.next(i)
			ack, err := b.w.setVersion(ctx, i, v)
			if err != nil {
				return err
			}
			acks[i] = ack
			followers.Go(func() (err error) {
				arrivals[i], err = b.follow(fctx, i, ats, want, false)
				return err
			})
			return nil
		})
		if err := errors.Join(err, followers.Wait()); err != nil {
			return err
		}
		p.took = last(arrivals).Sub(start)
		p.acked = slices.MaxFunc(acks, time.Time.Compare).Sub(start)
		for i := range n {
			p.seen = append(p.seen, arrivals[i].seen.Sub(acks[i]))
			p.answered = append(p.answered, arrivals[i].answered.Sub(acks[i]))
		}
		return nil
	})
}

// observe runs fn between two quiet scrapes of the controller's metrics and
// keeps what changed in between.
func (b *bench) observe(ctx context.Context, p *phase, fn func() error) error {
	before, err := b.settle(ctx)
	if err != nil {
		return err
	}
	if err := fn(); err != nil {
		return err
	}
	after, err := b.settle(ctx)
	if err != nil {
		return err
	}
	p.writes, p.timings, p.cpu = after.since(before), after.timingsSince(before), after.cpu-before.cpu
	return nil
}

// next is service i's next version, the answer it gives, and the channels
// that tell when each consumer's watch sees it; registered before the
// write, so that no event is missed.
func (b *bench) next(i int) (int, string, []awaited) {
	v := (b.w.versions[i] + 1) % versions
	want := answerOf(b.w.addresses(i, v))
	return v, want, b.watch.await(b.consumers, importedName(i), want)
}

// change moves service i to its next version and returns when the update
// was acknowledged and when its result arrived, watch and DNS side by side.
func (b *bench) change(ctx context.Context, i int) (time.Time, arrival, error) {
	v, want, ats := b.next(i)
	ack, err := b.w.setVersion(ctx, i, v)
	if err != nil {
		return ack, arrival{}, err
	}
	a, err := b.follow(ctx, i, ats, want, true)
	return ack, a, err
}

// follow waits until every consumer's watch sees service i's imported
// slice hold want (ats tell, in the order of the watches) and member2's
// coredns-mcs answers it: side by side when independent, else DNS polling
// starts once the watches have seen it. The time seen is the last
// consumer's.
func (b *bench) follow(ctx context.Context, i int, ats []awaited, want string, independent bool) (arrival, error) {
	var a arrival
	seen := func() (err error) {
		a.seen, err = b.seen(ctx, i, ats, want)
		return err
	}
	answered := func() (err error) {
		a.answered, err = b.dns.poll(ctx, fqdn(i, b.w.opts.namespace), want)
		return err
	}
	if !independent {
		if err := seen(); err != nil {
			return a, err
		}
		return a, answered()
	}
	var g errgroup.Group
	g.Go(seen)
	g.Go(answered)
	return a, g.Wait()
}

// seen waits until every watch of ats saw service i's imported slice hold
// want, and returns when the last one did.
func (b *bench) seen(ctx context.Context, i int, ats []awaited, want string) (time.Time, error) {
	var last time.Time
	for _, w := range ats {
		select {
		case t := <-w.at:
			last = later(last, t)
		case <-ctx.Done():
			return last, fmt.Errorf("imported slice %s/%s in %s holds %q, want %q: %w",
				b.w.opts.namespace, importedName(i), w.iw.cluster, w.iw.current(importedName(i)), want, context.Cause(ctx))
		}
	}
	return last, nil
}

// last is the latest answer of arrivals.
func last(arrivals []arrival) time.Time {
	var t time.Time
	for _, a := range arrivals {
		t = later(t, a.answered)
	}
	return t
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// The controller is quiet when its writes (Leases aside, which it renews
// on a clock) have not changed for settleQuiet; settleTimeout bounds the
// wait.
const (
	settleQuiet   = 2 * time.Second
	settleTimeout = time.Minute
	scrapeEvery   = 250 * time.Millisecond
)

// settle waits until the controller is quiet and returns its metrics then,
// so that a phase counts its own writes and no tail of the one before.
func (b *bench) settle(ctx context.Context) (*scrape, error) {
	ctx, cancel := context.WithTimeout(ctx, settleTimeout)
	defer cancel()
	last, err := b.scrape(ctx)
	if err != nil {
		return nil, err
	}
	quiet := time.Now()
	for time.Since(quiet) < settleQuiet {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("the controller did not stop writing for %s within %s; last writes: %v", settleQuiet, settleTimeout, last.writes)
		case <-time.After(scrapeEvery):
		}
		s, err := b.scrape(ctx)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(s.since(last), func(w writeCount) bool { return !isLease(w) }) {
			last, quiet = s, time.Now()
		}
	}
	return last, nil
}

func (b *bench) scrape(ctx context.Context) (*scrape, error) {
	s, err := fetchMetrics(ctx, b.metricsURLs)
	if err != nil {
		return nil, fmt.Errorf("mcs-controller's metrics: %w", err)
	}
	return s, nil
}
