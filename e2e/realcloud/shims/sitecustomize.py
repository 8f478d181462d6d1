# The test cloud's shim for oslo.db on SQLite, loaded by every service through PYTHONPATH.
#
# oslo.db opens every SQLite transaction with a deferred BEGIN, so a writer transaction reads
# before it takes the write lock. In WAL mode a writer whose first read came before another
# connection's commit can never take the lock: SQLite fails its first write at once with
# "database is locked", which no busy timeout waits out. With several Cinder processes writing
# one database (cinder-volume forks one per backend), that failed volume creations on a busy host.
#
# This shim opens the outermost transaction of every enginefacade writer with BEGIN IMMEDIATE,
# which takes the write lock first (waiting for it up to the busy timeout), so that its reads
# and writes see one state. Readers keep the deferred BEGIN and never wait. The patch is made
# when oslo.db's enginefacade is first imported, so that importing this file imports nothing of
# the services' own (nova and cinder monkey-patch with eventlet before their first import of
# threading).
import importlib.util
import sys

_MODULE = "oslo_db.sqlalchemy.enginefacade"


def _patch(enginefacade):
    import contextlib
    import threading

    import sqlalchemy
    from sqlalchemy import event

    state = threading.local()  # green under eventlet: the module loads after the monkey-patch
    context = enginefacade._TransactionContext

    def outermost(block):
        @contextlib.contextmanager
        def wrapped(self, *args, **kwargs):
            if self.session is not None or self.connection is not None:
                with block(self, *args, **kwargs) as inner:
                    yield inner
                return
            before = getattr(state, "immediate", False)
            state.immediate = self.mode is enginefacade._WRITER
            try:
                with block(self, *args, **kwargs) as inner:
                    yield inner
            finally:
                state.immediate = before
        return wrapped

    context._session = outermost(context._session)
    context._connection = outermost(context._connection)

    # A listener of the Engine class runs before each engine's own, so before oslo.db's, which
    # then sees the transaction begun and emits nothing.
    @event.listens_for(sqlalchemy.engine.Engine, "begin")
    def _begin_immediate(conn):
        if (conn.dialect.name == "sqlite" and getattr(state, "immediate", False)
                and "in_transaction" not in conn.info):
            conn.execute(sqlalchemy.text("BEGIN IMMEDIATE"))
            conn.info["in_transaction"] = True


class _PatchOnImport:
    def find_spec(self, name, path=None, target=None):
        if name != _MODULE:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module):
            load(module)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchOnImport())
