"""The Web Reference Host: the host page, its sign-in page and the SDK, served by the service (which
serves each MiniApp's page from the app's own folder)."""
