// Package config reads the Envoy rate limit service's configuration, in
// envoyproxy/ratelimit's YAML format, and finds the limits that apply to a
// request's descriptor.
//
// A file holds one domain and a tree of descriptors:
//
//	domain: api
//	descriptors:
//	  - key: remote_address
//	    rate_limit: {unit: minute, requests_per_unit: 60}
//	  - key: path
//	    value: /login*          # a '*' matches any run of characters
//	    rate_limit: {unit: second, requests_per_unit: 5, name: login}
//	    descriptors:
//	      - key: user
//	        rate_limit: {unit: hour, requests_per_unit: 100}
//
// with envoyproxy/ratelimit's fields (rate_limit's unit, requests_per_unit,
// name, replaces and unlimited; shadow_mode, detailed_metric,
// value_to_metric, share_threshold and metadata) and rlserver's additions
// to rate_limit: algorithm (fixed, sliding, log, token, leaky, gcra),
// unit_multiplier (a window of N units) and burst; and rate_limits, a list
// of more rate_limit entries on the same descriptor, every one of which
// applies. A file that envoyproxy/ratelimit loads loads here unchanged,
// except one that sets quota_mode, which is refused.
//
// Errors name the file, the line and the field. The package holds no
// counters: the envoyrls service turns a Match into checks.
package config
