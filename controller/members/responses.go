package members

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
)

// A member's API server is not trusted to answer what an API server
// answers: every answer is bounded as it arrives, before client-go buffers
// or decodes it, at what the controller needs of it. The bytes counted are
// those client-go reads: Go's transport undoes the gzip it asked for
// below the wrapper (rest.Config.Wrap), so 1 MiB of gzip that inflates to
// GiBs is counted inflated; an encoding it did not ask for is passed on
// as it came, and what is decoded is then those bytes.
//
//   - A watch event (initial lists arrive as watches too) at most
//     maxObjectBytes and maxElements: its frame, in the 4-byte
//     length-delimited protobuf stream or, in a JSON stream, from the end
//     of one top-level value to the end of the next (jsonFrames). The
//     initial events of a watch-list, which client-go holds until the
//     last, count against the member's --member-max-objects and, with
//     what its informers hold, --member-max-mib as they arrive.
//   - A GET or write of one object, and discovery, maxObjectBytes.
//   - A list, which client-go reads whole before decoding it: each of
//     its items at most maxObjectBytes and maxElements, as a watch event;
//     at most --member-max-objects items and maxListElements values; and
//     its bytes count against the member's --member-max-mib as they
//     arrive, with what its informers hold and the initial events and
//     lists under way, as the initial events of a watch-list do; a paged
//     list's pages together, bytes, items and values, until its last. A list is not bounded at a
//     size of its own: the informers' first list asks for resourceVersion
//     0, which an API server answers from its watch cache whole, whatever
//     limit it was asked for (its cacher's computeListLimit, to this
//     day), so a namespace's objects, each within what etcd stores,
//     arrive in one answer.
//   - Anything else (/readyz, the probe) maxProbeBytes.
//
// An answer past its bound fails the request, and the member is refused
// (Member.refuse): it is not an API server to trust.

// maxObjectBytes bounds one object as the API server sends or the caches
// hold it. etcd refuses a request past 1.5 MiB (its --max-request-bytes
// by default), so no API server stores a larger object; a watch event
// adds its type and frame, some dozens of bytes. The rest of the 2 MiB
// is margin for an etcd configured a little higher.
const maxObjectBytes = 2 << 20

// maxElements bounds the values (fields, entries, items) of one object,
// which decoding takes more than its bytes: a million empty endpoints
// take 2 MiB of JSON, and over 100 MiB decoded. 131,072 are seven times
// the 17,000 that an EndpointSlice of 1,000 endpoints, the most an API
// server lets one hold, has.
const maxElements = 1 << 17

// maxListElements bounds the values of a list: 10,000 Services of 100.
const maxListElements = 1 << 20

// maxProbeBytes bounds an answer of a path that is not the API's:
// /readyz says "ok", or a line per check (about 2 KiB verbose).
const maxProbeBytes = 8 << 10

// listChunk is the least of a list read, and counted, at a time.
const listChunk = 64 << 10

// answers bounds the answers of one member's API server, and tells the
// member of each it refused.
type answers struct {
	name   string
	member atomic.Pointer[Member] // once made
	// arriving is the bytes of the initial events of its watches
	// (watch-list), and of its lists, under way: client-go holds them
	// until the last, before its informers count any.
	arriving atomic.Int64
	// pages are the lists whose next page is to come, by the token that
	// asks for it: client-go's pager holds every page's objects until the
	// last, so their bytes stay in arriving until then.
	mu    sync.Mutex
	pages map[string]pages
}

// pages are the pages of a list read so far: what the list asked for,
// their bytes, items and values.
type pages struct {
	what            string
	bytes           int64
	items, elements int
}

// takePages takes the pages of the list that token continues out of
// those to come, still counted; a list that continues none (its first
// page) releases those of the lists of what it asks for before it, which
// their pager gave up.
func (a *answers) takePages(what, token string) pages {
	a.mu.Lock()
	defer a.mu.Unlock()
	if token != "" {
		p := a.pages[token]
		delete(a.pages, token)
		return pages{what: what, bytes: p.bytes, items: p.items, elements: p.elements}
	}
	for t, p := range a.pages {
		if p.what == what {
			a.arriving.Add(-p.bytes)
			delete(a.pages, t)
		}
	}
	return pages{what: what}
}

// morePages keeps the pages of a list, their bytes counted, until its
// page that token asks for is read.
func (a *answers) morePages(token string, p pages) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.pages == nil {
		a.pages = map[string]pages{}
	}
	a.pages[token] = p
}

// wrap is the rest.Config WrapTransport that bounds every answer.
func (a *answers) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		resp, err := next.RoundTrip(req)
		if err != nil {
			return resp, err
		}
		b := &boundedBody{ReadCloser: resp.Body, answers: a, what: req.Method + " " + req.URL.Path, continues: req.URL.Query().Get("continue")}
		b.limit, b.frames, b.initial, b.items = answerBound(req, resp)
		resp.Body = b
		return resp, nil
	})
}

// maxItems is how many objects one answer may bring: as many as the
// member's informers may hold (--member-max-objects), else none counted.
func (a *answers) maxItems() int {
	if m := a.member.Load(); m != nil {
		return m.maxObjects
	}
	return 0
}

// overBytes reports whether what the member's informers hold and the
// initial events under way pass --member-max-mib, which it returns.
func (a *answers) overBytes() (int64, bool) {
	m := a.member.Load()
	if m == nil || m.maxBytes <= 0 {
		return 0, false
	}
	held := int64(0)
	if c := m.current(); c != nil {
		held = c.bytes.Load()
	}
	return m.maxBytes, held+a.arriving.Load() > m.maxBytes
}

// refuse refuses err, the member's answer.
func (a *answers) refuse(err error) error {
	if m := a.member.Load(); m != nil {
		m.refuse(err)
	}
	return err
}

// answerBound is what the answer resp to req may take: in each frame, or
// whole when frames is nil (0: a list, bounded by its items and the
// member's --member-max-mib); and how its objects are counted, when it is
// a watch that begins with a list (watch-list), or a list.
func answerBound(req *http.Request, resp *http.Response) (limit int64, frames framer, initial *initialEvents, items *listItems) {
	if isWatch(req) {
		protobuf := isProtobuf(resp, "watch")
		if req.URL.Query().Get("sendInitialEvents") == "true" {
			initial = &initialEvents{protobuf: protobuf}
		}
		if protobuf {
			return maxObjectBytes, &lengthFrames{}, initial, nil
		}
		return maxObjectBytes, &jsonFrames{}, initial, nil
	}
	switch path := strings.Split(strings.Trim(req.URL.Path, "/"), "/"); {
	case path[0] != "api" && path[0] != "apis":
		return maxProbeBytes, nil, nil, nil
	case req.Method == http.MethodGet && isCollection(path):
		return 0, nil, nil, &listItems{protobuf: isProtobuf(resp, "")}
	}
	return maxObjectBytes, nil, nil, nil
}

func isWatch(req *http.Request) bool {
	w := req.URL.Query().Get("watch")
	return w == "true" || w == "1"
}

// isProtobuf reports whether resp is in protobuf, as a stream of that
// kind ("watch") or not ("").
func isProtobuf(resp *http.Response, stream string) bool {
	mediaType, params, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mediaType == runtime.ContentTypeProtobuf && params["stream"] == stream
}

// isCollection reports whether an API path (split at "/") names a
// collection: a resource, of every namespace or of one. The path of a
// Namespace's subresource, namespaces/<ns>/status, reads as one; the
// controller never GETs one.
func isCollection(path []string) bool {
	prefix := 2 // api/<version>
	if path[0] == "apis" {
		prefix = 3 // apis/<group>/<version>
	}
	if len(path) <= prefix {
		return false // discovery
	}
	rest := path[prefix:]
	return len(rest) == 1 || len(rest) == 3 && rest[0] == "namespaces"
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// boundedBody fails an answer once it, or one of its frames, passes
// limit, or it brings more objects than the member may have held.
type boundedBody struct {
	io.ReadCloser
	*answers
	what    string
	limit   int64          // 0: a list's, by its items
	frames  framer         // nil: the answer is one frame
	initial *initialEvents // nil: not a watch-list
	items   *listItems     // nil: not a list
	n       int64          // bytes of the answer, when it is one frame
	list    *bytes.Reader
	listed  pages // of the list so far, its bytes counted in arriving
	// continues is the token of the list whose page this is ("": its first).
	continues string
	err       error
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.items != nil {
		return b.readList(p)
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	var over string
	switch {
	case b.frames != nil:
		over = b.frames.next(p[:n], b.limit, b.counted)
	case b.n > b.limit:
		over = tooLarge(b.limit)
	}
	switch {
	case over != "":
		b.err = b.answers.refuse(b.refusal(over))
	case b.err != nil: // counted too many
	default:
		return n, err
	}
	return 0, b.err
}

// counted counts a frame that ended, of size bytes, small (the frame
// itself when small, else nil), while it is an initial event.
func (b *boundedBody) counted(size int64, small []byte) {
	if b.initial == nil || b.err != nil {
		return
	}
	if b.initial.ends(small) {
		b.release()
		return
	}
	if !b.initial.add(b.answers, size) {
		return
	}
	max, overBytes := b.overBytes()
	switch {
	case overBytes:
		b.err = b.answers.refuse(fmt.Errorf("%s answered %s with initial events that, with what it holds, take more than %s (decoded; --member-max-mib): refused", b.name, b.what, resource.NewQuantity(max, resource.BinarySI)))
	case b.maxItems() > 0 && b.initial.count() > b.maxItems():
		b.err = b.answers.refuse(b.tooMany(b.maxItems()))
	}
}

// release takes the initial events, or the list, out of those under
// way: they ended, or the answer did.
func (b *boundedBody) release() {
	if b.initial != nil {
		b.initial.release(b.answers)
	}
	b.arriving.Add(-b.listed.bytes)
	b.listed.bytes = 0
}

// Close releases the initial events, and closes the answer. A watch is
// closed while it is read, when it is stopped.
func (b *boundedBody) Close() error {
	b.release()
	return b.ReadCloser.Close()
}

// readList reads a list whole, within its bounds, and counts its items
// before client-go reads it: a list is buffered whole to be decoded into
// as many objects at once.
func (b *boundedBody) readList(p []byte) (int, error) {
	if b.list == nil {
		b.listed = b.takePages(b.what, b.continues)
		data, err := b.readWhole()
		if err == nil {
			err = b.checkItems(data)
		}
		if err != nil {
			b.err = err
			return 0, err
		}
		if next := b.items.next(data); next != "" {
			b.morePages(next, b.listed)
			b.listed.bytes = 0
		}
		b.list = bytes.NewReader(data)
	}
	n, err := b.list.Read(p)
	if err == io.EOF {
		b.list = bytes.NewReader(nil) // read: client-go holds its copy
	}
	return n, err
}

// readWhole reads the list, counting its bytes into the member's arriving
// as they come: past --member-max-mib, with what the member holds and
// what else arrives, it is refused.
func (b *boundedBody) readWhole() ([]byte, error) {
	var data []byte
	for {
		data = slices.Grow(data, listChunk)
		n, err := b.ReadCloser.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		b.listed.bytes += int64(n)
		b.arriving.Add(int64(n))
		if max, over := b.overBytes(); over {
			return nil, b.answers.refuse(fmt.Errorf("%s answered %s with a list that, with what it holds, takes more than %s (decoded; --member-max-mib): refused", b.name, b.what, resource.NewQuantity(max, resource.BinarySI)))
		}
		switch {
		case err == io.EOF:
			return data, nil
		case err != nil:
			return nil, err
		}
	}
}

// checkItems counts a list's items, and the values of each and of all,
// with those of its pages before, before client-go decodes them.
func (b *boundedBody) checkItems(data []byte) error {
	// One pass counts the items and finds the first one past its bounds.
	var over string
	b.items.each(data, func(size, elements int) bool {
		b.listed.items++
		switch {
		case over != "":
		case size > maxObjectBytes:
			over = tooLarge(maxObjectBytes)
		case elements > maxElements:
			over = tooManyElements(maxElements)
		}
		return true
	})
	b.listed.elements += b.items.elements(data)
	if max := b.maxItems(); max > 0 && b.listed.items > max {
		return b.answers.refuse(b.tooMany(max))
	}
	if b.listed.elements > maxListElements {
		return b.answers.refuse(b.refusal(tooManyElements(maxListElements)))
	}
	if over != "" {
		return b.answers.refuse(fmt.Errorf("%s answered %s with a list of an object %s (decoded): refused, as no API server stores one", b.name, b.what, over))
	}
	return nil
}

// refusal says that the answer passed a bound, as over says.
func (b *boundedBody) refusal(over string) error {
	what := "an answer"
	if b.frames != nil {
		what = "a watch event"
	}
	return fmt.Errorf("%s answered %s with %s %s (decoded): refused, as no API server answers the controller that much", b.name, b.what, what, over)
}

func (b *boundedBody) tooMany(max int) error {
	return fmt.Errorf("%s answered %s with more than %d objects, more than its informers may hold (--member-max-objects): refused", b.name, b.what, max)
}

// framer finds the frames of a stream: next counts p's bytes into the
// current frame, calls ended at the end of each with its size and the
// frame when it is at most maxSmallFrame bytes (else nil), and says how
// a frame passed its bounds ("": none did): limit bytes, or maxElements.
type framer interface {
	next(p []byte, limit int64, ended func(size int64, small []byte)) (over string)
}

// tooLarge and tooMany say how an answer, or a frame, passed its bounds.
func tooLarge(limit int64) string {
	return "larger than " + resource.NewQuantity(limit, resource.BinarySI).String()
}

func tooManyElements(limit int) string { return fmt.Sprintf("of more than %d values", limit) }

// maxSmallFrame is the largest frame kept for its end: a bookmark of the
// end of the initial events takes about 200 bytes.
const maxSmallFrame = 1 << 10

// small keeps the bytes of a frame while it is small.
type small struct {
	data []byte
	long bool
}

func (s *small) add(p []byte) {
	if !s.long && len(s.data)+len(p) > maxSmallFrame {
		s.data, s.long = s.data[:0], true
	}
	if !s.long {
		s.data = append(s.data, p...)
	}
}

// take is the frame that ended, when small, valid until the next add.
func (s *small) take() []byte {
	frame := s.data
	if s.long {
		frame = nil
	}
	s.data, s.long = s.data[:0], false
	return frame
}

// lengthFrames are the frames of a protobuf watch stream: each a 4-byte
// big-endian length, then that many bytes (client-go's
// framer.NewLengthDelimitedFrameReader). A frame is refused by its
// length, before any of it is read.
type lengthFrames struct {
	header     [4]byte
	got        int   // bytes of the current length read
	size, left int64 // bytes of the current frame, and still to come
	frame      []byte
}

func (f *lengthFrames) next(p []byte, limit int64, ended func(int64, []byte)) string {
	for len(p) > 0 {
		if f.left > 0 {
			k := min(int64(len(p)), f.left)
			f.frame = append(f.frame, p[:k]...)
			f.left, p = f.left-k, p[k:]
			if f.left == 0 {
				if over := f.end(ended); over != "" {
					return over
				}
			}
			continue
		}
		f.header[f.got], f.got, p = p[0], f.got+1, p[1:]
		if f.got == len(f.header) {
			f.got, f.size = 0, int64(binary.BigEndian.Uint32(f.header[:]))
			f.left = f.size
			if f.size > limit {
				return tooLarge(limit)
			}
			if f.size == 0 {
				ended(0, nil)
			}
		}
	}
	return ""
}

// end ends the frame read whole: its values are counted before the
// decoder, which has not had its last bytes, decodes it.
func (f *lengthFrames) end(ended func(int64, []byte)) string {
	frame := f.frame
	f.frame = f.frame[:0]
	if cap(f.frame) > maxSmallFrame<<6 {
		f.frame = nil // a large frame's buffer is not kept for the watch's life
	}
	if protobufElements(frame, maxDepth) > maxElements {
		return tooManyElements(maxElements)
	}
	if len(frame) <= maxSmallFrame {
		ended(f.size, frame)
	} else {
		ended(f.size, nil)
	}
	return ""
}

// jsonFrames are the frames of a JSON watch stream: top-level values,
// one after another, which client-go's framer decodes one at a time,
// buffering each whole. A frame is what comes after the end of the last
// value up to the end of the next, whitespace included, which the
// decoder buffers too; strings are followed so that a brace inside one is
// not taken for the value's end.
type jsonFrames struct {
	json  jsonScanner
	n     int64 // bytes of the current frame
	frame small
}

func (f *jsonFrames) next(p []byte, limit int64, ended func(int64, []byte)) string {
	start := 0
	for i, c := range p {
		f.n++
		if f.n > limit {
			return tooLarge(limit)
		}
		closed := f.json.step(c)
		if f.json.elements > maxElements {
			return tooManyElements(maxElements)
		}
		if closed && f.json.depth == 0 {
			f.frame.add(p[start : i+1])
			size := f.n
			start, f.n, f.json.elements = i+1, 0, 0
			ended(size, f.frame.take())
		}
	}
	f.frame.add(p[start:])
	return ""
}

// jsonScanner follows the nesting of JSON values, a byte at a time, and
// counts the values begun in objects and arrays (elements): one for each
// object or array, and each comma.
type jsonScanner struct {
	depth             int
	inString, escaped bool
	elements          int
}

// step takes c and reports whether it closed an object or an array.
func (s *jsonScanner) step(c byte) (closed bool) {
	switch {
	case s.inString:
		switch {
		case s.escaped:
			s.escaped = false
		case c == '\\':
			s.escaped = true
		case c == '"':
			s.inString = false
		}
	case c == '"':
		s.inString = true
	case c == '{' || c == '[':
		s.depth++
		s.elements++
	case c == ',':
		s.elements++
	case c == '}' || c == ']':
		s.depth--
		return true
	}
	return false
}

// initialEvents are the events of a watch up to the bookmark that ends
// its initial events (watch-list): the informer holds them all until it,
// before its handlers count any.
type initialEvents struct {
	protobuf bool
	mu       sync.Mutex
	n        int   // events
	bytes    int64 // and their bytes, in a.arriving
	done     bool  // the bookmark came, or the watch ended
}

// add counts an event of size bytes into a's arriving, unless done; it
// reports whether it did.
func (e *initialEvents) add(a *answers, size int64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.done {
		return false
	}
	e.n++
	e.bytes += size
	a.arriving.Add(size)
	return true
}

// count is how many events were counted.
func (e *initialEvents) count() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// release takes the events out of a's arriving, once.
func (e *initialEvents) release(a *answers) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.done {
		e.done = true
		a.arriving.Add(-e.bytes)
	}
}

// ends reports whether frame, when not nil, ends the initial events.
func (e *initialEvents) ends(frame []byte) bool {
	return frame != nil && endsInitialEvents(frame, e.protobuf)
}

// endsInitialEvents reports whether a watch event is the bookmark that
// ends the initial events, as client-go's reflector reads it: a value
// that merely says k8s.io/initial-events-end does not.
func endsInitialEvents(frame []byte, protobuf bool) bool {
	var ev metav1.WatchEvent
	var meta metav1.PartialObjectMetadata
	if protobuf {
		var u runtime.Unknown
		if ev.Unmarshal(frame) != nil || !bytes.HasPrefix(ev.Object.Raw, protobufMagic) ||
			u.Unmarshal(ev.Object.Raw[len(protobufMagic):]) != nil || meta.Unmarshal(u.Raw) != nil {
			return false
		}
	} else if json.Unmarshal(frame, &ev) != nil || json.Unmarshal(ev.Object.Raw, &meta) != nil {
		return false
	}
	return ev.Type == string(watch.Bookmark) && meta.Annotations[metav1.InitialEventsAnnotationKey] == "true"
}

// protobufMagic begins every object the API server encodes in protobuf.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// listItems counts the items of a list.
type listItems struct{ protobuf bool }

// elements counts a list's values, as jsonScanner and protobufElements
// count them.
func (l *listItems) elements(data []byte) int {
	if l.protobuf {
		return protobufElements(data, maxDepth)
	}
	var s jsonScanner
	for _, c := range data {
		s.step(c)
	}
	return s.elements
}

// next is the token that asks for the list's next page, "" when it has
// none. What cannot be read has none: the decoder refuses it.
func (l *listItems) next(data []byte) string {
	var meta metav1.ListMeta
	if !l.protobuf {
		var list struct {
			Metadata *metav1.ListMeta `json:"metadata"`
		}
		list.Metadata = &meta
		_ = json.Unmarshal(data, &list)
		return meta.Continue
	}
	if !bytes.HasPrefix(data, protobufMagic) {
		return ""
	}
	fields(data[len(protobufMagic):], func(num protowire.Number, raw []byte) {
		if num == 2 {
			fields(raw, func(num protowire.Number, v []byte) {
				if num == 1 {
					_ = meta.Unmarshal(v)
				}
			})
		}
	})
	return meta.Continue
}

// each calls item with the size and the values of each of the list's
// items, as jsonScanner and protobufElements count them, until it returns
// false.
func (l *listItems) each(data []byte, item func(size, elements int) bool) {
	if l.protobuf {
		protobufItems(data, item)
		return
	}
	jsonItems(data, item)
}

// jsonItems finds the values of a JSON list's arrays (its items) that
// are objects: the objects one level below an array of the top-level
// object.
func jsonItems(data []byte, item func(size, elements int) bool) {
	var s jsonScanner
	var arrayAt2 bool
	start, elements := 0, 0
	for i, c := range data {
		opening := !s.inString && (c == '{' || c == '[')
		closed := s.step(c)
		switch {
		case opening && s.depth == 2:
			arrayAt2 = c == '['
		case opening && s.depth == 3 && arrayAt2 && c == '{':
			start, elements = i, s.elements
		case closed && s.depth == 2 && arrayAt2 && c == '}':
			if !item(i+1-start, s.elements-elements) {
				return
			}
		}
	}
}

// protobufItems finds the items of a protobuf list: the API server's
// envelope (runtime.Unknown after protobufMagic) holds the list in field
// 2, raw, whose field 2 are the items. What cannot be read has no items:
// the decoder refuses it.
func protobufItems(data []byte, item func(size, elements int) bool) {
	if !bytes.HasPrefix(data, protobufMagic) {
		return
	}
	more := true
	fields(data[len(protobufMagic):], func(num protowire.Number, raw []byte) {
		if num == 2 {
			fields(raw, func(num protowire.Number, v []byte) {
				if num == 2 && more {
					more = item(len(v), protobufElements(v, maxDepth))
				}
			})
		}
	})
}

// fields calls each with the number and bytes of each length-delimited
// field of a protobuf message, until the end or what is not one.
func fields(msg []byte, each func(protowire.Number, []byte)) {
	for len(msg) > 0 {
		num, typ, n := protowire.ConsumeTag(msg)
		if n < 0 {
			return
		}
		msg = msg[n:]
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, msg); n < 0 {
				return
			}
			msg = msg[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(msg)
		if n < 0 {
			return
		}
		each(num, v)
		msg = msg[n:]
	}
}

// maxDepth is how deep protobufElements looks: a watch event holds its
// object in two envelopes, and an EndpointSlice's deepest values are
// five levels below it.
const maxDepth = 12

// protobufElements counts the fields of a protobuf message and of the
// messages within it, down to depth: a length-delimited field that reads
// whole as a message (after protobufMagic, as the API server's objects
// begin) counts as its fields too. Read without the schema, a string
// that happens to read as a message counts as one: more, never fewer,
// than the decoder makes.
func protobufElements(msg []byte, depth int) int {
	n, _ := elementsOf(bytes.TrimPrefix(msg, protobufMagic), depth)
	return n
}

// elementsOf counts msg's fields, and reports whether it read whole as a
// message.
func elementsOf(msg []byte, depth int) (int, bool) {
	n := 0
	for len(msg) > 0 {
		num, typ, k := protowire.ConsumeTag(msg)
		if k < 0 {
			return n, false
		}
		msg = msg[k:]
		n++
		if typ == protowire.BytesType && depth > 0 {
			v, k := protowire.ConsumeBytes(msg)
			if k < 0 {
				return n, false
			}
			if inner, ok := elementsOf(bytes.TrimPrefix(v, protobufMagic), depth-1); ok {
				n += inner
			}
			msg = msg[k:]
			continue
		}
		if k = protowire.ConsumeFieldValue(num, typ, msg); k < 0 {
			return n, false
		}
		msg = msg[k:]
	}
	return n, true
}
