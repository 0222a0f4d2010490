# The shortlink writer: web form and JSON API on port 8080, configured by
# docker/shortlink.toml (or the file CONFIG names). Build from the
# repository root:
#   docker build -f docker/writer.Dockerfile -t shortlink-writer .

FROM rust:1-slim-trixie AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p shortlink-writer

FROM debian:trixie-slim
ARG CONFIG=docker/shortlink.toml
RUN useradd --system --no-create-home --uid 10001 shortlink
COPY --from=build /src/target/release/shortlink /usr/local/bin/shortlink
COPY ${CONFIG} /etc/shortlink/shortlink.toml
USER 10001
EXPOSE 8080
CMD ["shortlink", "serve", "--config", "/etc/shortlink/shortlink.toml"]
