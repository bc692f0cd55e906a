"""Producer ids (``producer_id_manager``: blocks from /latest_producer_id_block); the
transaction coordinator (transactions in __transaction_state) is not built yet."""
