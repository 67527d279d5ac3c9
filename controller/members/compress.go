package members

import (
	"bytes"
	"compress/flate"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	mcsv1b1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/coredns-mcs/coredns-mcs/api/v1alpha1"
)

// Objects of one kind repeat one another: their field names, label keys
// and values, owners, ports, the conditions' messages. So a packed object
// is compressed (DEFLATE) after a sample of its kind, its dictionary: an
// object of its type and class (the controller's own objects, or others')
// as a lab's API server returned it, built into the binary (samples/),
// trimmed as the caches trim it. The API server's objects then take tens
// of bytes each where their protobuf or JSON takes hundreds; one that does
// not compress is kept as it is. The dictionary is never a member's
// object: a member whose huge object became it would make every later
// pack and read of that kind, for every member, cost what compressing that
// object costs.

//go:embed samples/*.json
var samples embed.FS

// sampleFiles are the samples of each type, by class (ours).
var sampleFiles = map[dictionaryKey]string{
	{reflect.TypeFor[corev1.Service](), true}:                "derived-service.json",
	{reflect.TypeFor[corev1.Service](), false}:               "source-service.json",
	{reflect.TypeFor[discoveryv1.EndpointSlice](), true}:     "imported-slice.json",
	{reflect.TypeFor[discoveryv1.EndpointSlice](), false}:    "source-slice.json",
	{reflect.TypeFor[mcsv1b1.ServiceImport](), true}:         "service-import.json",
	{reflect.TypeFor[mcsv1b1.ServiceImport](), false}:        "service-import.json",
	{reflect.TypeFor[mcsv1b1.ServiceExport](), false}:        "service-export.json",
	{reflect.TypeFor[v1alpha1.MultiClusterService](), false}: "multiclusterservice.json",
}

// maxDictionary is DEFLATE's window: what is further back than that is
// never referred to.
const maxDictionary = 32 << 10

// dictionary is what the objects of one type and class are compressed
// against. A flate writer made with a dictionary takes 800 KB and keeps
// it; the writers are shared instead, and a dictionary is the stream a
// writer makes of it, up to a flush, that every object's stream goes on
// from: the object holds its own part only, and a reader is given the
// dictionary's first.
type dictionary struct {
	ours   bool   // the controller's objects (see ours)
	data   []byte // as encoded
	stream []byte // data compressed and flushed, as every object's stream begins
}

// The first byte of a packed object's data says how the rest is held.
const (
	stored   byte = iota // encoded
	deflated             // encoded, compressed after the dictionary's stream
)

var (
	dictionaries sync.Map  // dictionaryKey → *dictionary
	writers      sync.Pool // of *flate.Writer
	readers      sync.Pool // of flate readers
	buffers      = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

type dictionaryKey struct {
	t    reflect.Type
	ours bool
}

// dictionaryOf is the dictionary of type T and class ours.
func dictionaryOf[T any](ours bool) *dictionary {
	key := dictionaryKey{reflect.TypeFor[T](), ours}
	if d, ok := dictionaries.Load(key); ok {
		return d.(*dictionary)
	}
	actual, _ := dictionaries.LoadOrStore(key, newDictionary(ours, sample[T](key)))
	return actual.(*dictionary)
}

// sample is the encoded sample of key's type and class, trimmed as the
// caches trim it; nil when there is none, or it is past maxDictionary
// (a bug: objects are then compressed alone).
func sample[T any](key dictionaryKey) []byte {
	file, ok := sampleFiles[key]
	if !ok {
		return nil
	}
	raw, err := samples.ReadFile("samples/" + file)
	if err != nil {
		return nil
	}
	var obj T
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil
	}
	if m, ok := any(&obj).(*v1alpha1.MultiClusterService); ok {
		keepIdentity(&m.ObjectMeta, true) // as TrimHub does
	} else {
		cut(&obj)
	}
	data, err := encode(&obj)
	if err != nil || len(data) > maxDictionary {
		return nil
	}
	return data
}

func newDictionary(ours bool, data []byte) *dictionary {
	d := &dictionary{ours: ours, data: bytes.Clone(data)}
	buf := new(bytes.Buffer)
	if d.deflate(buf, nil) == nil { // else no object's stream begins with it: each is stored
		d.stream = buf.Bytes()
	}
	return d
}

// deflate writes to buf the dictionary's stream, flushed; then, when data
// is not nil, data's after it, closed.
func (d *dictionary) deflate(buf *bytes.Buffer, data []byte) error {
	w, _ := writers.Get().(*flate.Writer)
	if w == nil {
		w, _ = flate.NewWriter(buf, flate.DefaultCompression) // a valid level: no error
	} else {
		w.Reset(buf)
	}
	defer writers.Put(w)
	if _, err := w.Write(d.data); err != nil || data == nil {
		return errors.Join(err, w.Flush())
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return err
	}
	return w.Close()
}

// compress is data as a packed object holds it.
func (d *dictionary) compress(data []byte) []byte {
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	err := d.deflate(buf, data)
	// The dictionary's stream is the same every time: only what follows
	// is the object's.
	own := buf.Bytes()[min(len(d.stream), buf.Len()):]
	if err != nil || !bytes.HasPrefix(buf.Bytes(), d.stream) || len(own) >= len(data) {
		return append([]byte{stored}, data...)
	}
	return append([]byte{deflated}, own...)
}

// decompressed calls use with the encoded object that data holds, which
// use must not keep.
func (d *dictionary) decompressed(data []byte, use func([]byte) error) error {
	if data[0] == stored {
		return use(data[1:])
	}
	src := io.MultiReader(bytes.NewReader(d.stream), bytes.NewReader(data[1:]))
	r, _ := readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReader(src)
	} else if err := r.(flate.Resetter).Reset(src, nil); err != nil {
		return err
	}
	defer readers.Put(r)
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return err
	}
	if buf.Len() < len(d.data) {
		return fmt.Errorf("a packed object of %d bytes is shorter than its dictionary", buf.Len())
	}
	return use(buf.Bytes()[len(d.data):])
}

// Built-in types are encoded in protobuf, custom resources in JSON, as
// the API server sends them.

type protoMessage interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

func encode[T any](obj *T) ([]byte, error) {
	if m, ok := any(obj).(protoMessage); ok {
		return m.Marshal()
	}
	return json.Marshal(obj)
}

func decode[T any](data []byte, obj *T) error {
	if m, ok := any(obj).(protoMessage); ok {
		return m.Unmarshal(data)
	}
	return json.Unmarshal(data, obj)
}
