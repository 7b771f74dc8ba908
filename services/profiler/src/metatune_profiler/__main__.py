from .app import create_service

create_service().run()
