# The image is built FROM scratch around the static binary that `make build`
# produces (CGO_ENABLED=0), so building it pulls nothing: run `make docker`.
FROM scratch
COPY bin/rlserver /rlserver
EXPOSE 6379 8080
VOLUME /data
ENTRYPOINT ["/rlserver", "--listen", "0.0.0.0:6379", "--http", "0.0.0.0:8080", "--data-dir", "/data"]
