"""Empty so far: where the transaction coordinator goes (producer id blocks from
/latest_producer_id_block, transactions in __transaction_state)."""
