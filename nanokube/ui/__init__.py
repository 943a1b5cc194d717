"""The web console: a static page the API server serves under /ui/. The page holds no
secret and has no privileged path into the server: the user pastes a bearer token and every
request the page makes is an ordinary API request under it, so RBAC applies as for kubectl."""
