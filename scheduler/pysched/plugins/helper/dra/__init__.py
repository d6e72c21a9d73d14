"""Dynamic Resource Allocation helpers: the device-selector CEL environment and the allocator."""
