package members

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"io"
	"reflect"
	"sync"
)

// Objects of one kind repeat one another: their field names, label keys
// and values, owners, ports, the namespace, the cluster names. So a
// packed object is compressed (DEFLATE) with another of its kind as the
// dictionary: the first one the controller packed of its type and class
// (the controller's own objects, or others'), kept for as long as the
// process runs. The API server's objects then take tens of bytes each
// where their protobuf or JSON takes hundreds; one that does not compress
// is kept as it is.

// dictionary is what the objects of one type and class are compressed
// against.
type dictionary struct {
	ours    bool // the controller's objects (see ours)
	data    []byte
	writers sync.Pool // of *flate.Writer with data as their dictionary, 800 KB each
}

// The first byte of a packed object's data says how the rest is held.
const (
	stored   byte = iota // encoded
	deflated             // encoded and compressed against the dictionary
)

var (
	dictionaries sync.Map  // dictionaryKey → *dictionary
	readers      sync.Pool // of flate readers, reset to each dictionary
	buffers      = sync.Pool{New: func() any { return new(bytes.Buffer) }}
)

type dictionaryKey struct {
	t    reflect.Type
	ours bool
}

// dictionaryOf is the dictionary of type T and class ours, first is the
// encoded object that becomes it when there is none yet.
func dictionaryOf[T any](ours bool, first []byte) *dictionary {
	key := dictionaryKey{reflect.TypeFor[T](), ours}
	if d, ok := dictionaries.Load(key); ok {
		return d.(*dictionary)
	}
	d, _ := dictionaries.LoadOrStore(key, &dictionary{ours: ours, data: bytes.Clone(first)})
	return d.(*dictionary)
}

// compress is data as a packed object holds it.
func (d *dictionary) compress(data []byte) []byte {
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	buf.WriteByte(deflated)
	w, _ := d.writers.Get().(*flate.Writer)
	if w == nil {
		w, _ = flate.NewWriterDict(buf, flate.DefaultCompression, d.data) // a valid level: no error
	} else {
		w.Reset(buf)
	}
	defer d.writers.Put(w)
	if _, err := w.Write(data); err != nil || w.Close() != nil || buf.Len() > len(data) {
		return append([]byte{stored}, data...)
	}
	return bytes.Clone(buf.Bytes())
}

// decompressed calls use with the encoded object that data holds, which
// use must not keep.
func (d *dictionary) decompressed(data []byte, use func([]byte) error) error {
	if data[0] == stored {
		return use(data[1:])
	}
	r, _ := readers.Get().(io.ReadCloser)
	if r == nil {
		r = flate.NewReaderDict(bytes.NewReader(data[1:]), d.data)
	} else if err := r.(flate.Resetter).Reset(bytes.NewReader(data[1:]), d.data); err != nil {
		return err
	}
	defer readers.Put(r)
	buf := buffers.Get().(*bytes.Buffer)
	defer buffers.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(r); err != nil {
		return err
	}
	return use(buf.Bytes())
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
