package controller

import "sync"

// syncMap is a sync.Map of keys K and values V: the controller's state
// that its workers and its informers' handlers share, typed.
type syncMap[K comparable, V any] struct{ m sync.Map }

func (s *syncMap[K, V]) Load(k K) (V, bool) { return typed[V](s.m.Load(k)) }

// typed is a value sync.Map returned, as V; the zero V when absent.
func typed[V any](v any, ok bool) (V, bool) {
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

// LoadOrStore returns the value k holds, storing v if it held none, and
// reports whether it held one already.
func (s *syncMap[K, V]) LoadOrStore(k K, v V) (V, bool) {
	got, loaded := s.m.LoadOrStore(k, v)
	return got.(V), loaded
}

func (s *syncMap[K, V]) Store(k K, v V) { s.m.Store(k, v) }
func (s *syncMap[K, V]) Delete(k K)     { s.m.Delete(k) }
func (s *syncMap[K, V]) Range(fn func(k K, v V) bool) {
	s.m.Range(func(k, v any) bool { return fn(k.(K), v.(V)) })
}
