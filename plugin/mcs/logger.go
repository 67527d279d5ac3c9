package mcs

import (
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// routeKlog sends what client-go logs through klog (reflector and watch
// errors, API warnings) to CoreDNS's log as plugin/mcs, in CoreDNS's format
// and JSON mode, as the kubernetes plugin does for its own. Without it those
// lines come out in klog's format on stderr, naming no plugin.
//
// klog has one logger per process, and the kubernetes plugin sets its own in
// its setup, every time. Its setup runs after mcs's (mcs comes before
// kubernetes in the plugin order), so with both in a Corefile the last one
// wins and client-go's lines say plugin/kubernetes: both plugins' informers
// share client-go and klog, so a line cannot name the plugin whose informer
// wrote it anyway, and both adapters write the same line at the same level.
// "Only if none is set" cannot be had: klog cannot say whether one is set,
// and mcs's setup comes first. mcs sets it at every setup, as kubernetes
// does, so that after a reload without kubernetes the lines say plugin/mcs.
// klog.InitFlags is not called: it would panic on reload.
func routeKlog() { klog.SetLogger(logr.New(klogSink{})) }

// klogSink is a logr.LogSink writing to the plugin's log. klog checks its
// verbosity before calling it (only V(0) by default) and hands it Error
// lines as Error and everything else, warnings included, as Info.
type klogSink struct {
	values []any // WithValues pairs, always an even number
}

func (klogSink) Init(logr.RuntimeInfo) {}

func (klogSink) Enabled(int) bool { return true }

func (s klogSink) Info(_ int, msg string, kv ...any) { log.Info(s.line(msg, nil, kv)) }

func (s klogSink) Error(err error, msg string, kv ...any) { log.Error(s.line(msg, err, kv)) }

func (s klogSink) WithValues(kv ...any) logr.LogSink {
	if len(kv) == 0 {
		return s
	}
	values := append(append([]any(nil), s.values...), kv...)
	if len(values)%2 != 0 {
		values = append(values, "(MISSING)") // what klog prints for a key without value
	}
	return klogSink{values: values}
}

func (s klogSink) WithName(string) logr.LogSink { return s }

// line is the message, then the error, then key=value pairs: client-go puts
// most of the context (resource, reflector) in those.
func (s klogSink) line(msg string, err error, kv []any) string {
	var b strings.Builder
	b.WriteString(msg)
	if err != nil {
		b.WriteString(": ")
		b.WriteString(err.Error())
	}
	pairs := append(s.values[:len(s.values):len(s.values)], kv...)
	for i := 0; i < len(pairs); i += 2 {
		var v any = "(MISSING)"
		if i+1 < len(pairs) {
			v = pairs[i+1]
		}
		switch v := v.(type) {
		case string:
			fmt.Fprintf(&b, " %v=%q", pairs[i], v)
		case error:
			fmt.Fprintf(&b, " %v=%q", pairs[i], v.Error())
		default:
			fmt.Fprintf(&b, " %v=%v", pairs[i], v)
		}
	}
	return b.String()
}
