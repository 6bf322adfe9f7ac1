# `specd serve` (src/server): the JSON API over HTTP with libmicrohttpd, part of the specd program.
pkg_check_modules(MICROHTTPD REQUIRED IMPORTED_TARGET libmicrohttpd)
target_sources(specd PRIVATE src/server/serve.c src/server/routes.c src/server/llama_routes.c src/server/calls.c src/server/sse.c
  src/server/conn.c)
target_link_libraries(specd PRIVATE PkgConfig::MICROHTTPD)
