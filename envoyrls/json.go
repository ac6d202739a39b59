package envoyrls

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// maxJSONBody bounds a POST /json body.
const maxJSONBody = 64 << 10

// JSONHandler serves POST /json as envoyproxy/ratelimit does: the body is
// a RateLimitRequest in protobuf's JSON form
// ({"domain": "d", "descriptors": [{"entries": [{"key": "k", "value": "v"}]}]}),
// the answer the RateLimitResponse in the same form, with status 200, or
// 429 when it is OVER_LIMIT, and the RateLimit headers of the response as
// HTTP headers; a body that is not a RateLimitRequest, or a request the
// service refuses, is 400 text/plain "Bad Request" as there. tokens, when not empty, are the bearer tokens a request
// must carry (Authorization: Bearer <token>).
func JSONHandler(svc *Service, tokens []string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			jsonError(w, http.StatusMethodNotAllowed, r.Method+" is not allowed here; use POST")
			return
		}
		if len(tokens) > 0 {
			t, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !Authorized(t, tokens) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="rlserver"`)
				jsonError(w, http.StatusUnauthorized, "authentication required: send Authorization: Bearer <--requirepass>")
				return
			}
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxJSONBody))
		if err != nil {
			jsonError(w, http.StatusRequestEntityTooLarge, "the body is larger than 64 KiB")
			return
		}
		var req pb.RateLimitRequest
		if err := protojson.Unmarshal(body, &req); err != nil {
			badRequest(w)
			return
		}
		resp, err := svc.ShouldRateLimit(r.Context(), &req)
		if err != nil {
			switch status.Code(err) {
			case codes.InvalidArgument, codes.Unknown:
				badRequest(w)
			default:
				jsonError(w, http.StatusServiceUnavailable, status.Convert(err).Message())
			}
			return
		}
		out, err := protojson.Marshal(resp)
		if err != nil {
			jsonError(w, http.StatusInternalServerError, err.Error())
			return
		}
		for _, h := range resp.ResponseHeadersToAdd {
			w.Header().Set(h.Key, h.Value)
		}
		w.Header().Set("Content-Type", "application/json")
		if resp.OverallCode == pb.RateLimitResponse_OVER_LIMIT {
			w.WriteHeader(http.StatusTooManyRequests)
		}
		w.Write(out)
	})
}

// badRequest answers a body that is not a RateLimitRequest, or a request
// the service refuses, as envoyproxy/ratelimit does: 400, text/plain
// "Bad Request" (Go's http.Error), so that a client that reads it sees the
// same answer.
func badRequest(w http.ResponseWriter) {
	http.Error(w, http.StatusText(http.StatusBadRequest), http.StatusBadRequest)
}

// jsonError writes {"error": msg} with status code.
func jsonError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // a JSON body, not HTML: "<--requirepass>" stays readable
	enc.Encode(map[string]string{"error": msg})
}
