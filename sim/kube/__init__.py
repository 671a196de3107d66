"""An in-process Kubernetes API server: store, REST front end and minimal controllers."""
