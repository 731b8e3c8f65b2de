"""moto_server, with two changes that keep its cost per call independent of the table's
size. What it answers is unchanged; scripts/test (the integration suite's servers) and
scripts/bench-writes start it as `.venv/bin/python scripts/moto_server.py -H HOST -p PORT`.

- TransactWriteItems keeps an undo log of the items it touches instead of deep-copying the
  whole table once per action (moto 5.2: 134 ms for a 9-action transaction on a table of
  150 items, seconds at 20,000; with the undo log 6.5 ms at any size); a cancellation
  rolls back the same, and the refusals (more than 100 actions, two actions on one item,
  an action of two kinds) are moto's own exceptions.
- Query on the table or a local secondary index reads only its partition's items instead
  of sorting every item of the table on every call (the same items, in the same order).

Both replace moto 5.2.5's code (checked below: a different moto fails to start, so a
version bump is a deliberate re-check). Measured on the integration suite's longest test
(`lists_match_a_reference_for_every_filter_and_combination`, 4,662 calls on one server):
moto spent 80 s of CPU, 57% of it sorting tables in Query and 12% deep-copying them in
TransactWriteItems (docs/development.md, CI's time).
"""
import copy
import sys
import threading

import moto

from moto.dynamodb.exceptions import (
    ConditionalCheckFailed,
    MockValidationException,
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import LocalSecondaryIndex, Table
from moto.dynamodb.comparisons import get_filter_expression
from moto.server import main


def transact_write_items(self, transact_items):
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    undo = []  # (table, hash, range, the item before, or None), in the order applied

    def remember(table_name, key):
        table = self.get_table(table_name)
        hash_value, range_value = self.get_keys_value(table, key)
        before = table.get_item(hash_value, range_value)
        undo.append((table, hash_value, range_value, copy.deepcopy(before)))

    def rollback():
        for table, hash_value, range_value, before in reversed(undo):
            if before is None:
                table.delete_item(hash_value, range_value)
            elif range_value is not None:
                table.items[hash_value][range_value] = before
            else:
                table.items[hash_value] = before

    target_items = set()

    def check_unicity(table_name, key):
        item = (str(table_name), str(dict(sorted(key.items()))))
        if item in target_items:
            raise MultipleTransactionsException()
        target_items.add(item)

    errors = []
    for item in transact_items:
        original_item = None
        if len(list(item.keys())) > 1:
            raise TransactWriteSingleOpException
        try:
            op_type, op = next(iter(item.items()))
            if op_type not in {"ConditionCheck", "Put", "Delete", "Update"}:
                raise ValueError("Unsupported transaction operation")
            table_name = op["TableName"]
            condition_expression = op.get("ConditionExpression")
            names = op.get("ExpressionAttributeNames")
            values = op.get("ExpressionAttributeValues")
            if op_type == "Put":
                attrs = op["Item"]
                table = self.get_table(table_name)
                key = {table.hash_key_attr: attrs[table.hash_key_attr]}
                if table.range_key_attr is not None:
                    key[table.range_key_attr] = attrs[table.range_key_attr]
            else:
                key = op["Key"]
            check_unicity(table_name, key)
            current = self.get_item(table_name, key)
            if condition_expression is not None:
                condition_op = get_filter_expression(condition_expression, names, values)
                if not condition_op.expr(current):
                    if op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" and current:
                        original_item = current.to_json()["Attributes"]
                    raise ConditionalCheckFailed(item=original_item)
            if op_type != "ConditionCheck":
                remember(table_name, key)
            if op_type == "Put":
                self.put_item(
                    table_name,
                    op["Item"],
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Delete":
                self.delete_item(
                    table_name,
                    key,
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    condition_expression=condition_expression,
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            errors.append((None, None, None))
        except (MultipleTransactionsException, MockValidationException):
            rollback()
            raise
        except ConditionalCheckFailed as e:
            errors.append(("ConditionalCheckFailed", str(e.message), original_item))
        except Exception as e:  # noqa: BLE001 (as moto: any other failure cancels)
            errors.append((type(e).__name__, str(e), original_item))
    if any(code is not None for code, _, _ in errors):
        rollback()
        raise TransactionCanceledException(errors)


_all_items = Table.all_items
_query = Table.query
# The partition a Query of this thread reads (its table and hash key): moto_server answers
# each request on a thread of its own, and two may query one table at once.
_only = threading.local()


def all_items(self):
    only = getattr(_only, "partition", None)
    if only is None or only[0] is not self:
        return _all_items(self)
    return sorted((self.items.get(only[1]) or {}).values(), key=lambda item: item.range_key)


def query(self, hash_key, *args, **kwargs):
    index_name = args[6] if len(args) > 6 else kwargs.get("index_name")
    own_partition = index_name is None or any(
        i.name == index_name and isinstance(i, LocalSecondaryIndex) for i in self.all_indexes()
    )
    if hash_key is None or not self.range_key_attr or not own_partition:
        return _query(self, hash_key, *args, **kwargs)
    _only.partition = (self, hash_key)
    try:
        return _query(self, hash_key, *args, **kwargs)
    finally:
        _only.partition = None


if moto.__version__ != "5.2.5":
    sys.exit(f"scripts/moto_server.py patches moto 5.2.5, not {moto.__version__} (scripts/requirements.txt)")
DynamoDBBackend.transact_write_items = transact_write_items
Table.all_items = all_items
Table.query = query
sys.exit(main())
