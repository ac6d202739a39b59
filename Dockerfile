# The image is built FROM scratch around the static binary that `make build`
# produces (CGO_ENABLED=0), so building it pulls nothing: run `make docker`.
# The flags come from RLSERVER_* variables (every flag has one); the
# defaults below serve on every interface with the data in the /data volume.
# `docker run -e RLSERVER_CONSISTENCY=strong rlserver` and
# `docker run rlserver --consistency strong` both work; a flag beats the
# environment.
FROM scratch
COPY bin/rlserver /rlserver
ENV RLSERVER_LISTEN=0.0.0.0:6379 \
    RLSERVER_HTTP=0.0.0.0:8080 \
    RLSERVER_DATA_DIR=/data
VOLUME /data
# RESP, HTTP, and Raft (--raft-addr, a cluster's own traffic).
EXPOSE 6379 8080 7379
ENTRYPOINT ["/rlserver"]
