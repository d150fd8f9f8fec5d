from ragdesk.cli.main import run

run()
