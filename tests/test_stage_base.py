"""The plumbing every stage inherits: its worker thread, the tasks it spawns, settling."""
import asyncio
import threading

from foresay.engine.events import StatusMessage
from foresay.engine.stage import Stage


class Worker(Stage):
    name = "test stage"
    worker = "test"


def test_a_failing_task_is_reported_once_as_a_status_message_and_never_left_unretrieved():
    emitted, unhandled = [], []

    async def main():
        asyncio.get_running_loop().set_exception_handler(lambda loop, context: unhandled.append(context))
        stage = Worker(emitted.append)

        async def broken():
            await asyncio.sleep(0)
            raise RuntimeError("boom")
        stage.spawn(broken())
        await stage.settle()
        stage.close()

    asyncio.run(main())
    assert [(type(e), e.level) for e in emitted] == [(StatusMessage, "error")]
    assert "test stage" in emitted[0].text and "boom" in emitted[0].text
    assert not unhandled


def test_settle_waits_for_spawned_work_and_what_it_spawns_but_not_for_lasting_loops():
    stage, done = Worker(), []

    async def main():
        async def later():
            await asyncio.sleep(0.02)
            done.append("inner")

        async def work():
            await asyncio.sleep(0.01)
            stage.spawn(later())
            done.append("outer")

        loop = stage.spawn(asyncio.sleep(60), lasting=True)
        stage.spawn(work())
        await asyncio.wait_for(stage.settle(), 5)
        assert done == ["outer", "inner"] and not loop.done()
        await stage.cancel()
        assert loop.cancelled()
        stage.close()

    asyncio.run(main())


def test_worker_calls_run_in_order_on_the_stages_own_thread():
    stage, names, order = Worker(), set(), []

    def step(i):
        names.add(threading.current_thread().name)
        order.append(i)
        return i

    async def main():
        return await asyncio.gather(*(stage.run_in_worker(step, i) for i in range(20)))

    assert asyncio.run(main()) == list(range(20))
    stage.close()
    assert order == list(range(20)) and len(names) == 1 and names.pop().startswith("foresay-test")
