package proxy

import (
	"bytes"
	"io"
	"net/http"
)

// maxRetryBody is the largest request body a retry replays: the fast path's bound on the bodies
// it buffers (64 KiB). A route with retries reads up to this much of a body before the first try
// and sends it again on a retry; a larger body goes out once, streamed, and is not retried
// (coxswain_proxy_retries_total{reason="body_too_large"} counts the failed tries it left).
const maxRetryBody = maxBufferedBody

// keptBody is a request body read whole, sent again on every try.
type keptBody struct{ b []byte }

// keepBody reads r's body for replay. body is nil when r has none (every try sends r as it
// is). kept is false when the body is larger than maxRetryBody: r.Body then reads what was read
// and the rest, and r goes out once. err is the client's body failing (malformed, cut short, too
// slow, or refused by a filter's reader).
func keepBody(r *http.Request) (body *keptBody, kept bool, err error) {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil, true, nil
	}
	if r.ContentLength > maxRetryBody {
		return nil, false, nil
	}
	if r.ContentLength > 0 {
		b := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, false, err
		}
		return &keptBody{b: b}, true, nil
	}
	b, err := io.ReadAll(io.LimitReader(r.Body, maxRetryBody+1))
	if err != nil {
		return nil, false, err
	}
	if len(b) > maxRetryBody {
		r.Body = &prefixedBody{Reader: io.MultiReader(bytes.NewReader(b), r.Body), body: r.Body}
		return nil, false, nil
	}
	return &keptBody{b: b}, true, nil
}

// request is r for one try, with the body from its start and its length known.
func (k *keptBody) request(r *http.Request) *http.Request {
	rr := r.WithContext(r.Context())
	rr.TransferEncoding = nil
	rr.ContentLength = int64(len(k.b))
	rr.Body = http.NoBody
	if len(k.b) > 0 {
		rr.Body = io.NopCloser(bytes.NewReader(k.b))
	}
	return rr
}

// prefixedBody is a body whose start was read already: it reads that, then the rest.
type prefixedBody struct {
	io.Reader
	body io.ReadCloser
}

func (b *prefixedBody) Close() error { return b.body.Close() }
