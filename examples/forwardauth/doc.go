// Package forwardauth holds the gateway configurations that docs/gateways.md's
// section "Behind a gateway" shows — a Caddyfile, an nginx server block and
// Traefik's dynamic configuration, each putting rlserver's /v1/forward-auth
// in front of a backend — and the tests that run the real Caddy and nginx
// with them (go test ./examples/forwardauth; the gateways come from
// Debian's caddy and nginx-light packages, which .ci/run installs).
package forwardauth
