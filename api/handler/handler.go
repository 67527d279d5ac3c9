// Package handler adapts informer events for mcs-controller, the mcs plugin
// and the benchmarks, in one place: a deletion the informer only learnt of
// by relisting arrives as a tombstone, and every handler must unwrap it.
package handler

import "k8s.io/client-go/tools/cache"

// Unwrap is the object of a deletion: the tombstone's last known state when
// the informer missed the deletion itself.
func Unwrap(obj any) any {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return tomb.Obj
	}
	return obj
}

// Each calls fn with the object of every addition, update (the new state)
// and deletion.
func Each(fn func(obj any)) cache.ResourceEventHandler {
	return Events(func(obj any, _ bool) { fn(obj) })
}

// Events is Each for a handler that tells a deletion (gone) from the rest.
func Events(fn func(obj any, gone bool)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { fn(obj, false) },
		UpdateFunc: func(_, obj any) { fn(obj, false) },
		DeleteFunc: func(obj any) { fn(Unwrap(obj), true) },
	}
}

// Typed calls set with (nil, new) on an addition, (old, new) on an update
// and (old, nil) on a deletion; objects of another type are ignored.
func Typed[T any](set func(old, cur *T)) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if cur, ok := obj.(*T); ok {
				set(nil, cur)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*T)
			cur, ok2 := newObj.(*T)
			if ok1 && ok2 {
				set(old, cur)
			}
		},
		DeleteFunc: func(obj any) {
			if old, ok := Unwrap(obj).(*T); ok {
				set(old, nil)
			}
		},
	}
}
