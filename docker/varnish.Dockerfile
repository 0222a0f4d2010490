# Varnish 7.7 with vmod_shortlink installed, running the VCL that the writer
# generates from docker/shortlink.toml (or the configuration CONFIG names).
# Build from the repository root:
#   docker build -f docker/varnish.Dockerfile -t shortlink-varnish .

# Debian 13 ships Varnish 7.7: the VMOD is built against the same headers
# and C library it runs with.
FROM rust:1-slim-trixie AS build
ARG CONFIG=docker/shortlink.toml
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        clang libclang-dev libvarnishapi-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p vmod_shortlink -p shortlink-writer \
    && target/release/shortlink vcl --config "$CONFIG" > /shortlink.vcl

FROM debian:trixie-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends varnish prometheus-varnish-exporter \
    && rm -rf /var/lib/apt/lists/*
# Imported by absolute path (see docker/shortlink.toml): the same on every architecture.
COPY --from=build /src/target/release/libvmod_shortlink.so /usr/local/lib/varnish/
COPY --from=build /shortlink.vcl /etc/varnish/default.vcl
# The parameters make run and make bench start Varnish with.
COPY vcl/varnishd.params /etc/varnish/shortlink.params
EXPOSE 6081
# Foreground, so the container lives as long as Varnish does; each line of
# the parameters file (comments dropped) becomes a -p.
CMD ["sh", "-c", "exec varnishd -F -n /var/lib/varnish/shortlink -a :6081 -f /etc/varnish/default.vcl -s malloc,256m $(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/^[[:space:]]*/-p /' /etc/varnish/shortlink.params)"]
