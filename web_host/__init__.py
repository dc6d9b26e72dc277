"""The Web Reference Host: the host page, the MiniApp pages and the SDK, served by the service."""
